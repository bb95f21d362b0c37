package httpd

import (
	"log/slog"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"
)

// Hashing a link password for storage is bcrypt at linkPasswordCost: some
// 70 ms of one core, 20 s for a bulk of 300. Every check that can refuse
// a create or an edit runs before it; what is left is budgeted three ways,
// each a token bucket of hashes, and a request takes from all three:
//
//   - per client (an IPv4 address, an IPv6 /64, as for creates), so that
//     no one client, an anonymous one with --public-create included, holds
//     the others up;
//   - per API key, so that a key used from many addresses has one budget;
//   - per node, sized from its CPUs, so that all clients and keys together
//     spend at most about a seventh of the node's CPU on it over time.
//
// And at most a quarter of the cores hash at once (hashSlots), so whatever
// was admitted, redirects keep the other cores. Checking a visitor's
// password is bounded separately, before bcrypt runs (guessLimiter).
const (
	clientHashesPerMinute = 30
	clientHashBurst       = 10
	keyHashesPerMinute    = 60
	keyHashBurst          = 20
	// nodeHashesPerCore a second, at 70 ms each, is 14 % of a core.
	nodeHashesPerCore    = 2
	nodeHashBurstPerCore = 10
	coresPerHashSlot     = 4
)

// hashBudget is the budget for hashing link passwords (see above).
type hashBudget struct {
	now func() time.Time // time.Now; tests stop the clock

	mu      sync.Mutex // held over each admission, so it takes from all buckets or none
	clients buckets[netip.Addr]
	keys    buckets[string]
	node    *rate.Limiter
	// slots holds a token for each hash running: a hash waits for room.
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

// hashLimits are the budgets of a hashBudget.
type hashLimits struct {
	perClient, perKey budget
	node              rate.Limit // hashes a second
	nodeBurst         int
	slots             int
}

// defaultHashLimits are the budgets for a node with cores CPUs.
func defaultHashLimits(cores int) hashLimits {
	cores = max(cores, 1)
	return hashLimits{
		perClient: budget{clientHashesPerMinute, clientHashBurst},
		perKey:    budget{keyHashesPerMinute, keyHashBurst},
		node:      rate.Limit(nodeHashesPerCore * cores),
		nodeBurst: nodeHashBurstPerCore * cores,
		slots:     max(1, cores/coresPerHashSlot),
	}
}

func newHashBudget(l hashLimits) *hashBudget {
	h := &hashBudget{
		now:     time.Now,
		clients: newBuckets[netip.Addr](l.perClient),
		keys:    newBuckets[string](l.perKey),
		node:    rate.NewLimiter(l.node, max(l.nodeBurst, 1)),
		slots:   make(chan struct{}, max(l.slots, 1)),
		done:    make(chan struct{}),
	}
	go h.sweep()
	return h
}

// newDefaultHashBudget is the budget of this process's CPUs.
func newDefaultHashBudget() *hashBudget {
	return newHashBudget(defaultHashLimits(runtime.GOMAXPROCS(0)))
}

// hashShortfall says why fewer hashes were admitted than asked for.
type hashShortfall struct {
	retryAfter int    // whole seconds until one more would be admitted
	whose      string // the budget that ran out, as a message names it
}

func (s *hashShortfall) message() string {
	return "too many link passwords hashed " + s.whose + "; retry after " + strconv.Itoa(s.retryAfter) + " s"
}

// admit takes up to n hashes from the budgets of client (none when it is
// not valid), keyID (none when "") and the node: as many as all of them
// have left. When that is fewer than n it also says why.
func (h *hashBudget) admit(client netip.Addr, keyID string, n int) (int, *hashShortfall) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	type bucket struct {
		b     *rate.Limiter
		whose string
	}
	var from []bucket
	if client.IsValid() {
		b, ok := h.clients.get(bucketKey(client))
		if !ok {
			return 0, &hashShortfall{int(limiterSweepInterval / time.Second), "for new addresses"}
		}
		from = append(from, bucket{b, "for this address"})
	}
	if keyID != "" {
		b, ok := h.keys.get(keyID)
		if !ok {
			return 0, &hashShortfall{int(limiterSweepInterval / time.Second), "for new API keys"}
		}
		from = append(from, bucket{b, "for this API key"})
	}
	from = append(from, bucket{h.node, "on this node"})

	granted := n
	for _, f := range from {
		if f.b != nil {
			granted = min(granted, wholeTokens(f.b, now))
		}
	}
	var short *hashShortfall
	for _, f := range from {
		if f.b == nil {
			continue
		}
		if granted > 0 {
			f.b.ReserveN(now, granted) // within what each holds: granted now
		}
		if wait := secondsToNextToken(f.b, now); granted < n && wait > 0 && (short == nil || wait > short.retryAfter) {
			short = &hashShortfall{wait, f.whose}
		}
	}
	return granted, short
}

// hash is hashLinkPassword in one of the node's hashing slots: it waits
// for one when all are taken.
func (h *hashBudget) hash(pw string) (string, error) {
	h.slots <- struct{}{}
	defer func() { <-h.slots }()
	return hashLinkPassword(pw)
}

func (h *hashBudget) sweep() {
	t := time.NewTicker(limiterSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case now := <-t.C:
			h.mu.Lock()
			h.clients.sweep(now)
			h.keys.sweep(now)
			h.mu.Unlock()
		}
	}
}

func (h *hashBudget) stop() { h.once.Do(func() { close(h.done) }) }

// linkPasswords hashes the passwords of new links within the node's
// hashing budget, charged to the request's client and key.
type linkPasswords struct {
	budget  *hashBudget
	proxies proxies
	log     *slog.Logger
}

// admit takes up to n hashes for the request's client and key.
func (p *linkPasswords) admit(ctx *fasthttp.RequestCtx, n int) (int, *hashShortfall) {
	return p.budget.admit(p.proxies.requestClient(ctx), keyID(ctx), n)
}

// hash hashes pw into dst within the request's budget. When the
// budget is spent, or hashing fails, it answers the request itself and
// returns false.
func (p *linkPasswords) hash(ctx *fasthttp.RequestCtx, pw string, dst *string) bool {
	if granted, short := p.admit(ctx, 1); granted == 0 {
		writeHashingLimited(ctx, short)
		return false
	}
	hash, err := p.budget.hash(pw)
	if err != nil {
		p.log.Error("hashing a link password failed", "err", err)
		writeProblem(ctx, fasthttp.StatusInternalServerError, "hashing the password failed")
		return false
	}
	*dst = hash
	return true
}

// writeHashingLimited answers a request whose password the budget refused.
func writeHashingLimited(ctx *fasthttp.RequestCtx, short *hashShortfall) {
	writeProblem(ctx, fasthttp.StatusTooManyRequests, short.message())
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(short.retryAfter))
}
