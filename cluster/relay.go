package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/queue"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// Relaying creates: a follower hands the creates its clients sent to the
// leader in batches, many creates in one POST creates, instead of one HTTP
// request each. The leader puts every item into its own proposer queue, so
// relayed creates share log entries with the leader's own, and answers each
// item: its link or FSM error, and the log index that decided it.
//
// Creates travel as one sealed fsm.CreateBatch entry and links as
// fsm.EncodeLink's bytes, the state machine's own encodings, so a field a
// create or a link gains cannot be dropped on the way. A follower sends
// the entry once every server reports fsm.LevelWire, and the legacy JSON
// fields before (a leader of an older build reads nothing else); the
// leader answers in the form the batch came in.

// maxRelayBodyBytes bounds the body of one relayed batch, below the
// receiver's wire.MaxBodyBytes. Only batches of long URLs ever reach it;
// a batch of ordinary links is a few dozen KiB.
const maxRelayBodyBytes = 3 << 20

// relayedSize is an upper bound of a create's size in a relayed batch:
// JSON escapes a byte into at most six ("\u003c"), plus the field names;
// the options travel encoded, in base64 (4 bytes for 3).
func relayedSize(r *fsm.CreateRequest) int {
	size := 6*(len(r.RequestID)+len(r.URL)+len(r.Canonical)+len(r.Workspace)+len(r.CustomCode)+len(r.KeyID)+len(r.Domain)) + 256
	if r.Options != nil {
		size += 2 * len(fsm.EncodeOptions(r.Options))
	}
	return size
}

// relayBatches cuts what the relay took into batches of one request each:
// to one leader (the one each create's attempt decided on), with or
// without request ids, and within maxRelayBodyBytes. Creates with and
// without request ids travel apart: only the former may be sent again
// after a lost answer, and a batch that may not must not hold them back.
func relayBatches(calls []*createCall) [][]*createCall {
	var batches [][]*createCall
	for _, route := range byRoute(calls) {
		size, start := 0, 0
		for i, c := range route {
			s := relayedSize(&c.req)
			if i > start && size+s > maxRelayBodyBytes {
				batches = append(batches, route[start:i])
				size, start = 0, i
			}
			size += s
		}
		batches = append(batches, route[start:])
	}
	return batches
}

// byRoute groups calls by leader and by whether they carry request ids,
// in the order they came.
func byRoute(calls []*createCall) [][]*createCall {
	type route struct {
		leader string
		keyed  bool
	}
	var (
		routes []route
		groups [][]*createCall
	)
	for _, c := range calls {
		r := route{c.leader, c.req.RequestID != ""}
		i := 0
		for i < len(routes) && routes[i] != r {
			i++
		}
		if i == len(routes) {
			routes = append(routes, r)
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}

// kindCreateBatch is a relayed batch in linkraft_forwarded_requests_total.
const kindCreateBatch = "create_batch"

// errNotApplied is the leader's answer that it applied none of a batch
// (it does not lead, or no longer): the batch may be sent anywhere again.
var errNotApplied = fmt.Errorf("%w: the node asked does not lead", ErrNoLeader)

// errLeaderChanged abandons a batch in flight to a node Raft no longer
// reports as the leader.
var errLeaderChanged = fmt.Errorf("%w: the leader changed while the request was in flight", ErrNoLeader)

// relayBatch sends one batch of creates to the leader and hands every
// caller its answer, or a retry when the batch did not decide its create
// and another attempt is safe (see createReply.retry). It is one attempt:
// callers that must try again queue again, so retries join fresh batches.
//
// A batch whose creates all carry request ids is abandoned as soon as Raft
// reports another leader (or none): a frozen or cut-off leader keeps its
// sockets open, so nothing else would end the wait before the deadline.
// The abandoned request may still be applied by the old leader; the
// request ids make the next attempt return that outcome.
func (p *createPath) relayBatch(batch []*createCall) {
	live, deadline := liveCalls(batch)
	if len(live) == 0 {
		return
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(p.timeout)
	}
	// The leader every create of the batch is for, as its attempt decided
	// (relayBatches keeps each batch to one).
	leader := live[0].leader
	p.metrics.relayBatch.Observe(float64(len(live)))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() { // a node that closes stops waiting on the leader at once
		select {
		case <-p.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	levelErr := p.levels.require(ctx, fsm.LevelWire)
	asEntry := levelErr == nil
	if !asEntry {
		if live = refuseUncarried(live, levelErr); len(live) == 0 {
			return
		}
	}
	keyed := live[0].req.RequestID != "" // relayBatches keeps keyed and unkeyed apart
	reqs := make([]fsm.CreateRequest, len(live))
	for i, c := range live {
		reqs[i] = c.req
	}
	answer, err := p.send(ctx, leader, relayBatchOf(reqs, asEntry), keyed)
	if err == nil && len(answer.Results) != len(live) {
		err = fmt.Errorf("the leader answered %d results for %d creates", len(answer.Results), len(live))
	}
	p.metrics.forwarded(kindCreateBatch, err)
	if err != nil {
		replyAll(live, relayFailure(err, keyed))
		return
	}
	for i, c := range live {
		c.done <- relayedReply(answer.Results[i], keyed)
	}
}

// liveCalls are the calls of batch whose callers still wait, and the
// latest of their deadlines (zero: none has one).
func liveCalls(batch []*createCall) (live []*createCall, deadline time.Time) {
	live = make([]*createCall, 0, len(batch))
	for _, c := range batch {
		if c.ctx.Err() != nil {
			continue // its caller has its answer (a timeout) already
		}
		live = append(live, c)
		if d, ok := c.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
	}
	return live, deadline
}

// refuseUncarried answers, with levelErr, the calls the legacy fields
// cannot carry, and returns the others. Create checked the level of each
// create before queuing it, which lets a create with a creation time or
// clicks (LevelImport) through at servers of LevelImport; their builds
// read neither in the legacy fields, so such a create is refused here
// rather than sent without them.
func refuseUncarried(calls []*createCall, levelErr error) []*createCall {
	return slices.DeleteFunc(calls, func(c *createCall) bool {
		if legacyCarries(&c.req) {
			return false
		}
		c.done <- createReply{err: levelErr}
		return true
	})
}

// relayFailure is the reply to every create of a batch that got no
// usable answer.
func relayFailure(err error, keyed bool) createReply {
	switch {
	case errors.Is(err, ErrRefused):
		// A leader that refuses the batch itself (an older version without
		// this exchange, a key mismatch) would refuse it again.
		return createReply{err: fmt.Errorf("%w: %w", ErrNoLeader, err)}
	case errors.Is(err, errNotApplied), wire.NeverSent(err):
		return createReply{err: err, retry: true}
	case keyed:
		return createReply{err: outcomeUnknown(err), retry: true}
	}
	return createReply{err: outcomeUnknown(err)}
}

// outcomeUnknown marks err as ErrTimeout: the leader may have applied the
// batch.
func outcomeUnknown(err error) error {
	if errors.Is(err, ErrTimeout) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrTimeout, err)
}

func replyAll(calls []*createCall, r createReply) {
	for _, c := range calls {
		c.done <- r
	}
}

// relayBatchOf is the body of POST creates for reqs: with asEntry the
// creates as one sealed fsm.CreateBatch entry, the log's own encoding,
// which carries every field; otherwise the legacy fields, for a leader of
// a build before fsm.LevelWire.
func relayBatchOf(reqs []fsm.CreateRequest, asEntry bool) wire.CreateBatch {
	batch := wire.CreateBatch{V: wire.Version}
	if asEntry {
		batch.Entry = fsm.CreateBatch{Items: reqs}.Encode()
		return batch
	}
	batch.Items = make([]wire.Create, len(reqs))
	for i := range reqs {
		batch.Items[i] = toWireCreate(reqs[i])
	}
	return batch
}

// legacyCarries reports whether the legacy fields (wire.Create) carry all
// of r: they have no creation time or click total, which only a create of
// LevelImport holds.
func legacyCarries(r *fsm.CreateRequest) bool { return r.Level() <= fsm.LevelOptions }

// send posts one batch to the leader at addr and returns its
// answer. With followLeader the request is abandoned (errLeaderChanged) as
// soon as addr is no longer the leader's address; the request itself runs
// out on its own goroutine, with its own buffers.
func (p *createPath) send(ctx context.Context, addr string, batch wire.CreateBatch, followLeader bool) (wire.CreateBatchAnswer, error) {
	body, err := json.Marshal(batch)
	if err != nil {
		return wire.CreateBatchAnswer{}, fmt.Errorf("encode creates: %w", err)
	}
	deadline, _ := ctx.Deadline()
	type outcome struct {
		answer wire.CreateBatchAnswer
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		var o outcome
		o.err = createsError(p.peers.Call(ctx, addr, fasthttp.MethodPost, wire.PathCreates, body, &o.answer))
		done <- o
	}()
	for {
		changed := p.leadership.changed.wait()
		if followLeader {
			if to, err := p.leadership.leader(); err != nil || to.addr != addr {
				return wire.CreateBatchAnswer{}, errLeaderChanged
			}
		}
		select {
		case o := <-done:
			return o.answer, o.err
		case <-changed:
		case <-ctx.Done():
			return wire.CreateBatchAnswer{}, fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
		}
	}
}

// createsError says what a failed POST creates means for its creates:
// 503 is the receiver's word that it applied nothing (errNotApplied), a
// 4xx but 429 a refusal of the whole batch (ErrRefused), no connection
// ErrNoLeader; anything else leaves the outcome unknown.
func createsError(err error) error {
	var status *wire.StatusError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &status):
		return fmt.Errorf("%w: %w", ErrNoLeader, err)
	case status.Status == fasthttp.StatusServiceUnavailable:
		return fmt.Errorf("%w: %w", errNotApplied, err)
	case status.Refused():
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

// serve is the leader's end of POST creates: every item joins this
// node's proposer queue, and the answer holds one result per item, its
// link in the form the batch came in (a sender of the legacy fields may
// be of a build that reads nothing else).
func (p *createPath) serve(ctx *fasthttp.RequestCtx) {
	var batch wire.CreateBatch
	if err := wire.Decode(ctx.PostBody(), &batch); err != nil {
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	reqs, refused, err := relayedCreates(batch)
	if err != nil {
		wire.WriteProblem(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	asEntry := len(batch.Entry) > 0
	wait, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	// A node that does not lead says so at once, having applied nothing,
	// rather than wait: the sender tries the node it learns leads.
	if err := p.leadership.waitReady(wait, true); err != nil {
		writeUnavailable(ctx, err)
		return
	}
	answer := wire.CreateBatchAnswer{V: wire.Version, Results: make([]wire.CreateResult, len(reqs))}
	calls := make([]*createCall, len(reqs))
	var queued []*createCall
	for i, req := range reqs {
		err := refused[i]
		if err == nil {
			err = p.admit(wait, req)
		}
		if err != nil {
			answer.Results[i] = wire.CreateResult{Error: wire.KindOf(err), Detail: err.Error()}
			continue
		}
		calls[i] = &createCall{ctx: wait, req: req, fromFollower: true, done: make(chan createReply, 1)}
		queued = append(queued, calls[i])
	}
	if len(queued) > 0 {
		// One put for the whole batch, so that its creates share entries
		// rather than trickle into the proposer one by one.
		if err := p.proposer.Put(wait, queued...); errors.Is(err, queue.ErrStopped) {
			notQueued(calls, answer.Results, ErrClosed.Error())
		} else if err != nil {
			notQueued(calls, answer.Results, "not queued within the write timeout")
		}
	}
	awaitResults(wait, calls, answer.Results, asEntry)
	wire.WriteMessage(ctx, answer)
}

// admit checks a relayed create against the rules a client's create
// meets: a peer is trusted to relay, not to decide what may be stored.
func (p *createPath) admit(ctx context.Context, req fsm.CreateRequest) error {
	if err := input.Prepared(req, p.allowPrivate); err != nil {
		return fmt.Errorf("%w: %w", fsm.ErrInvalidRequest, err)
	}
	return p.levels.require(ctx, req.Level())
}

// awaitResults fills results with the outcome of each queued call (nil:
// answered already) until wait ends: what is not decided by then is
// answered as unknown.
func awaitResults(wait context.Context, calls []*createCall, results []wire.CreateResult, asEntry bool) {
	for i, c := range calls {
		if c == nil {
			continue
		}
		select {
		case r := <-c.done:
			results[i] = toWireResult(r, asEntry)
		case <-wait.Done():
			results[i] = wire.CreateResult{Error: wire.KindUnknown, Detail: ErrTimeout.Error()}
		}
	}
}

// notQueued answers every create of calls as not applied, and forgets
// the calls.
func notQueued(calls []*createCall, results []wire.CreateResult, why string) {
	for i, c := range calls {
		if c != nil {
			results[i] = wire.CreateResult{Error: wire.KindNotApplied, Detail: why}
			calls[i] = nil
		}
	}
}

// relayedCreates is what a relayed batch asks for: its creates, and for
// each the reason it is refused alone, if any (what checkCreate refuses,
// and in the legacy fields an unknown strategy). An entry that is not an
// intact create batch refuses the whole batch: nothing of it is queued.
func relayedCreates(batch wire.CreateBatch) ([]fsm.CreateRequest, []error, error) {
	if len(batch.Entry) == 0 {
		reqs, refused := make([]fsm.CreateRequest, len(batch.Items)), make([]error, len(batch.Items))
		for i, it := range batch.Items {
			reqs[i], refused[i] = createRequestOf(it)
		}
		return reqs, refused, nil
	}
	cmd, err := fsm.DecodeCommand(batch.Entry)
	if err != nil {
		return nil, nil, fmt.Errorf("relayed creates: %w", err)
	}
	creates, ok := cmd.(fsm.CreateBatch)
	if !ok {
		return nil, nil, fmt.Errorf("relayed creates: the entry is a %T, not a create batch", cmd)
	}
	refused := make([]error, len(creates.Items))
	for i := range creates.Items {
		refused[i] = checkCreate(creates.Items[i])
	}
	return creates.Items, refused, nil
}

// toWireResult is the leader's answer for one item, its link as
// fsm.EncodeLink's bytes with asEntry (the sender reads them), in the
// legacy fields otherwise.
func toWireResult(r createReply, asEntry bool) wire.CreateResult {
	switch {
	case r.err == nil && r.res.Err == nil && asEntry:
		return wire.CreateResult{LinkBytes: fsm.EncodeLink(r.res.Link), Existing: r.res.Existing, Index: r.index}
	case r.err == nil && r.res.Err == nil:
		return wire.CreateResult{Link: wire.FromLink(r.res.Link), Existing: r.res.Existing, Index: r.index}
	case r.err == nil:
		return wire.CreateResult{Error: wire.KindOf(r.res.Err), Detail: r.res.Err.Error(), Index: r.index}
	case errors.Is(r.err, ErrNoLeader):
		return wire.CreateResult{Error: wire.KindNotApplied, Detail: r.err.Error()}
	}
	return wire.CreateResult{Error: wire.KindUnknown, Detail: r.err.Error()}
}

// relayedReply is the relaying node's reply for one item of the leader's
// answer.
func relayedReply(w wire.CreateResult, keyed bool) createReply {
	switch w.Error {
	case "":
		l, err := w.FSMLink()
		if err != nil {
			return createReply{err: fmt.Errorf("the leader's answer: %w", err)}
		}
		return createReply{res: fsm.CreateResult{Link: l, Existing: w.Existing}, index: w.Index}
	case wire.KindNotApplied:
		return createReply{err: fmt.Errorf("%w: leader: %s", ErrNoLeader, w.Detail), retry: true}
	case wire.KindUnknown:
		return createReply{err: fmt.Errorf("%w: leader: %s", ErrTimeout, w.Detail), retry: keyed}
	}
	return createReply{res: fsm.CreateResult{Err: wire.RefusalOf(w.Error, w.Detail)}, index: w.Index}
}

// toWireCreate is r in the legacy fields, which lack CreatedAt and Clicks
// (see legacyCarries). Kept solely for upgrades from builds before
// fsm.LevelWire, as createRequestOf: remove once no supported release
// predates LevelWire.
func toWireCreate(r fsm.CreateRequest) wire.Create {
	w := wire.Create{
		RequestID: r.RequestID, URL: r.URL, Canonical: r.Canonical, Workspace: r.Workspace,
		CustomCode: r.CustomCode, Dedupe: r.Dedupe, ExpiresAt: r.ExpiresAt, CodeLength: r.CodeLength, KeyID: r.KeyID,
		Domain: r.Domain,
	}
	if r.Options != nil {
		w.Options = fsm.EncodeOptions(r.Options)
	}
	if r.Strategy == fsm.StrategyHash {
		w.Strategy = "hash"
	}
	return w
}

// createRequestOf is the create a relayed item in the legacy fields asks
// for. An unknown strategy (from a newer node) is refused as invalid
// rather than guessed, and so is what checkCreate refuses: one bad item
// must not fail a whole log entry.
func createRequestOf(w wire.Create) (fsm.CreateRequest, error) {
	r := fsm.CreateRequest{
		RequestID: w.RequestID, URL: w.URL, Canonical: w.Canonical, Workspace: w.Workspace,
		CustomCode: w.CustomCode, Dedupe: w.Dedupe, ExpiresAt: w.ExpiresAt, CodeLength: w.CodeLength, KeyID: w.KeyID,
		Domain: w.Domain,
	}
	if len(w.Options) > 0 {
		o, err := fsm.DecodeOptions(w.Options)
		if err != nil {
			return r, fmt.Errorf("%w: %v", fsm.ErrInvalidRequest, err)
		}
		r.Options = o
	}
	switch w.Strategy {
	case "", "counter":
		r.Strategy = fsm.StrategyCounter
	case "hash":
		r.Strategy = fsm.StrategyHash
	default:
		return r, fmt.Errorf("%w: unknown strategy %q", fsm.ErrInvalidRequest, w.Strategy)
	}
	return r, checkCreate(r)
}
