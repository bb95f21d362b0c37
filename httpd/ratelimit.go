package httpd

import (
	"bytes"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"
)

// ipLimiter is a token bucket per client for creates and edits: per IPv4
// address, per IPv6 /64 (see bucketKey). Buckets that have refilled
// completely are dropped by a sweeper, so memory follows the number of
// recently active clients.
type ipLimiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time // time.Now; tests stop the clock

	// mu guards buckets, and is held over each reservation so that what
	// takeUpTo reads of a bucket is still there when it takes it.
	mu      sync.Mutex
	buckets map[netip.Addr]*rate.Limiter
	done    chan struct{}
	once    sync.Once
}

const limiterSweepInterval = time.Minute

func newIPLimiter(perSecond float64, burst int) *ipLimiter {
	l := &ipLimiter{limit: rate.Limit(perSecond), burst: max(burst, 1), now: time.Now, buckets: map[netip.Addr]*rate.Limiter{}, done: make(chan struct{})}
	if perSecond > 0 {
		go l.sweep()
	}
	return l
}

// allow takes a token for ip. When none is left it returns how many whole
// seconds to wait before the next one.
func (l *ipLimiter) allow(ip netip.Addr) (retryAfter int, ok bool) { return l.allowN(ip, 1) }

// allowN takes n tokens for ip, or none: then it returns how many whole
// seconds to wait until n are there. n must not exceed the burst.
func (l *ipLimiter) allowN(ip netip.Addr, n int) (retryAfter int, ok bool) {
	if l.limit <= 0 {
		return 0, true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(ip)
	r := b.ReserveN(now, n)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return int(math.Ceil(delay.Seconds())), false
	}
	return 0, true
}

// takeUpTo takes as many of n tokens for ip as are left: a bulk of n
// creates is admitted up to the client's budget. When it takes fewer than
// n it returns how many whole seconds to wait for the next one.
func (l *ipLimiter) takeUpTo(ip netip.Addr, n int) (taken, retryAfter int) {
	if l.limit <= 0 {
		return n, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(ip)
	taken = min(n, wholeTokens(b, now))
	if taken > 0 {
		b.ReserveN(now, taken) // within what is left: granted now
	}
	if taken < n {
		retryAfter = secondsToNextToken(b, now)
	}
	return taken, retryAfter
}

// bucket is ip's bucket, made if need be. l.mu must be held.
func (l *ipLimiter) bucket(ip netip.Addr) *rate.Limiter {
	key := bucketKey(ip)
	b, found := l.buckets[key]
	if !found {
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[key] = b
	}
	return b
}

// wholeTokens is how many whole tokens b holds at now.
func wholeTokens(b *rate.Limiter, now time.Time) int {
	return max(0, int(math.Floor(b.TokensAt(now))))
}

// secondsToNextToken is how many whole seconds, at least one, until b
// holds a token after now (0 when it holds one already).
func secondsToNextToken(b *rate.Limiter, now time.Time) int {
	missing := 1 - b.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	return max(1, int(math.Ceil(missing/float64(b.Limit()))))
}

// ipv6ClientBits is the prefix of an IPv6 address that names one client.
// A subscriber or host is given a /64 (RFC 6177, RFC 8273) and picks
// addresses in it freely (privacy addresses rotate daily), so counting per
// /128 would hand one client 2^64 buckets.
const ipv6ClientBits = 64

// bucketKey is the client an address belongs to for rate limiting: an IPv4
// address (IPv4-mapped IPv6 included) as it is, an IPv6 address's /64.
func bucketKey(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if !ip.Is6() {
		return ip
	}
	p, err := ip.WithZone("").Prefix(ipv6ClientBits)
	if err != nil { // cannot happen for a 16-byte address
		return ip
	}
	return p.Addr()
}

func (l *ipLimiter) sweep() {
	t := time.NewTicker(limiterSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case now := <-t.C:
			l.mu.Lock()
			for ip, b := range l.buckets {
				if b.TokensAt(now) >= float64(l.burst) {
					delete(l.buckets, ip)
				}
			}
			l.mu.Unlock()
		}
	}
}

func (l *ipLimiter) stop() { l.once.Do(func() { close(l.done) }) }

// budget is how fast one bucket of a limit refills, and how much it holds.
type budget struct {
	perMinute float64 // 0 or less: unlimited
	burst     int
}

// maxBuckets caps each map of buckets. A bucket with its key costs about
// 200 bytes, so 100k is some 20 MB per map at worst; beyond it new keys
// are refused rather than older ones evicted, because evicting would hand
// a spent bucket back full to a client that cycles addresses. Full
// buckets leave within two sweeps (under a minute to refill, one to be
// swept), so filling the map takes 100k fresh /64s a minute, and refusing
// them only delays password guesses and hashes.
const maxBuckets = 100_000

// take reserves a token of b at now. It returns the reservation, or how
// many whole seconds to wait when none is left. A nil b is unlimited.
func take(b *rate.Limiter, now time.Time) (*rate.Reservation, int) {
	if b == nil {
		return nil, 0
	}
	r := b.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return nil, int(math.Ceil(delay.Seconds()))
	}
	return r, 0
}

// buckets is one budget's buckets by key, at most max of them. Its owner's
// mutex guards it.
type buckets[K comparable] struct {
	limit rate.Limit
	burst int
	max   int
	m     map[K]*rate.Limiter
}

func newBuckets[K comparable](b budget) buckets[K] {
	return buckets[K]{
		limit: rate.Limit(b.perMinute / 60),
		burst: max(b.burst, 1),
		max:   maxBuckets,
		m:     map[K]*rate.Limiter{},
	}
}

// get is k's bucket, made if need be: nil when unlimited, not ok when k is
// new and the map is full.
func (g *buckets[K]) get(k K) (*rate.Limiter, bool) {
	if g.limit <= 0 {
		return nil, true
	}
	if b, found := g.m[k]; found {
		return b, true
	}
	if len(g.m) >= g.max {
		return nil, false
	}
	b := rate.NewLimiter(g.limit, g.burst)
	g.m[k] = b
	return b, true
}

func (g *buckets[K]) sweep(now time.Time) {
	for k, b := range g.m {
		if b.TokensAt(now) >= float64(g.burst) {
			delete(g.m, k)
		}
	}
}

// proxies are the trusted reverse proxies (--trusted-proxies): the
// addresses whose X-Forwarded-For names the client.
type proxies []netip.Prefix

// clientIP is the address a create is attributed to: the peer, or, when the
// peer is a trusted proxy, the nearest untrusted address in X-Forwarded-For.
func (p proxies) clientIP(ctx *fasthttp.RequestCtx) netip.Addr {
	peer := connPeer(ctx)
	if !p.trusted(peer) {
		return peer
	}
	// The server normalises header names as it parses them, so the
	// canonical name finds any spelling without Peek's copy of the key.
	xff := ctx.Request.Header.PeekCanonical(bytesOf(fasthttp.HeaderXForwardedFor))
	for len(xff) > 0 {
		i := bytes.LastIndexByte(xff, ',')
		hop := bytes.TrimSpace(xff[i+1:])
		xff = xff[:max(i, 0)]
		// ParseAddr keeps nothing of its argument: a view of the header
		// spares a copy on every request through a proxy.
		addr, err := netip.ParseAddr(unsafe.String(unsafe.SliceData(hop), len(hop)))
		if err != nil {
			return peer // malformed: do not trust anything further left
		}
		addr = addr.Unmap()
		if !p.trusted(addr) {
			return addr
		}
		peer = addr
		if i < 0 {
			break
		}
	}
	return peer
}

func (p proxies) trusted(ip netip.Addr) bool {
	for _, prefix := range p {
		if prefix.Contains(ip) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies parses a comma-separated list of IPs and CIDRs.
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range bytes.Split([]byte(list), []byte(",")) {
		item = bytes.TrimSpace(item)
		if len(item) == 0 {
			continue
		}
		if p, err := netip.ParsePrefix(string(item)); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(string(item))
		if err != nil {
			return nil, &net.ParseError{Type: "IP address or CIDR", Text: string(item)}
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
	}
	return out, nil
}
