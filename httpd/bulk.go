package httpd

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// bulkAPI serves bulk creates: screened on the node the client reached,
// then created by the leader in a few entries.
type bulkAPI struct {
	writes    Writes
	views     linkViews
	input     linkInput
	passwords *linkPasswords
	// limiter is the create rate limit, one create per item.
	limiter *ipLimiter
	proxies proxies
	log     *slog.Logger
}

func (api *bulkAPI) register(rt routing) {
	// A bulk create is served by the leader, which packs it into a few
	// log entries, once the node the client reached has screened its
	// items.
	bulk := api.screenBulk(rt.forwarder(api.handleBulk, forwardWrite.needs(fsm.LevelOptions)))
	rt.handle("POST", bulkPath, "bulk", rt.require(fsm.ScopeLinksWrite, bulk))
}

// maxBulkLinks is the most creates one bulk request may carry.
const (
	maxBulkLinks = 1000
	bulkPath     = "/api/v1/urls/bulk"
)

// bulkResult is one item's outcome, in the order of the request.
type bulkResult struct {
	Status int       `json:"status"`
	Link   *linkJSON `json:"link,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// bulkItem is one item of a bulk create: its create, ready for the log
// but for its password, which is hashed last; or its refusal.
type bulkItem struct {
	req      fsm.CreateRequest
	password string
	refusal  bulkResult // Status 0: not refused
}

func (it *bulkItem) refused() bool { return it.refusal.Status != 0 }

// readBulkItems decodes a bulk's envelope, leaving its items raw. It
// answers a malformed one itself.
func readBulkItems(ctx *fasthttp.RequestCtx) ([]json.RawMessage, bool) {
	var body struct {
		Links []json.RawMessage `json:"links"`
	}
	if err := decodeStrict(ctx.PostBody(), &body); err != nil {
		writeBadRequest(ctx, err)
		return nil, false
	}
	if len(body.Links) == 0 || len(body.Links) > maxBulkLinks {
		writeProblem(ctx, fasthttp.StatusBadRequest, "links must hold 1 to "+strconv.Itoa(maxBulkLinks)+" create bodies, got "+strconv.Itoa(len(body.Links)))
		return nil, false
	}
	return body.Links, true
}

// screenBulk runs on the node the client reached, before the bulk goes on
// to the leader. The bulk spends one create of the client's rate limit per
// item: it is admitted up to what the client has left, the rest of its
// items answered 429 (none left: the request is). Of the admitted items,
// those their own create would refuse (bad input, a workspace or domain
// the key may not use) are answered here. Only the others travel, so a
// bulk that can create nothing costs the leader nothing; the leader checks
// what it is sent again.
func (api *bulkAPI) screenBulk(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if fromPeer(ctx) {
			next(ctx) // screened by the node that forwarded it
			return
		}
		raws, ok := readBulkItems(ctx)
		if !ok {
			return
		}
		admitted, wait := api.limiter.takeUpTo(api.proxies.clientIP(ctx), len(raws))
		if admitted == 0 {
			writeCreatesLimited(ctx, wait)
			return
		}
		results := make([]any, len(raws))
		var passed []json.RawMessage
		var at []int // the index in results of each of passed
		for i, it := range api.prepareBulkItems(ctx, raws[:admitted]) {
			if it.refused() {
				results[i] = it.refusal
				continue
			}
			passed, at = append(passed, raws[i]), append(at, i)
		}
		for i := admitted; i < len(raws); i++ {
			results[i] = bulkResult{Status: fasthttp.StatusTooManyRequests, Error: createsLimitedDetail(wait)}
		}
		if len(passed) > 0 {
			created, ok := api.createPassed(ctx, next, passed)
			if !ok {
				return // the request was refused whole: that answer stands
			}
			for k, r := range created {
				results[at[k]] = r
			}
			if leaderWait, err := strconv.Atoi(string(ctx.Response.Header.Peek(fasthttp.HeaderRetryAfter))); err == nil {
				wait = max(wait, leaderWait)
			}
		}
		ctx.Response.ResetBody()
		writeBulkResults(ctx, results, wait)
	}
}

// createPassed hands the items that passed the screening to next (the
// leader) as a bulk of their own, and returns its results for them; false
// when next did not answer 200, whose answer then stands.
func (api *bulkAPI) createPassed(ctx *fasthttp.RequestCtx, next fasthttp.RequestHandler, passed []json.RawMessage) ([]json.RawMessage, bool) {
	body, err := json.Marshal(map[string][]json.RawMessage{"links": passed})
	if err != nil { // cannot happen: each item decoded as JSON
		writeProblem(ctx, fasthttp.StatusInternalServerError, "encoding the bulk failed")
		return nil, false
	}
	ctx.Request.SetBody(body)
	next(ctx)
	if ctx.Response.StatusCode() != fasthttp.StatusOK {
		return nil, false
	}
	var answer struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(ctx.Response.Body(), &answer); err != nil || len(answer.Results) != len(passed) {
		api.log.Error("the leader's bulk answer does not match its request", "items", len(passed), "results", len(answer.Results), "err", err)
		writeProblem(ctx, fasthttp.StatusInternalServerError, "bulk create failed")
		return nil, false
	}
	return answer.Results, true
}

// writeBulkResults answers a bulk, with Retry-After when some item was
// refused by a budget.
func writeBulkResults(ctx *fasthttp.RequestCtx, results any, retryAfter int) {
	if retryAfter > 0 {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(retryAfter))
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"results": results})
}

// handleBulk creates up to maxBulkLinks links from one request. It runs
// on the leader (the route forwards it), which packs the valid items into
// a few log entries; each item is answered as its own create would be.
// Every item is checked before any password is hashed, and passwords are
// hashed as far as the hashing budget allows.
func (api *bulkAPI) handleBulk(ctx *fasthttp.RequestCtx) {
	raws, ok := readBulkItems(ctx)
	if !ok {
		return
	}
	items := api.prepareBulkItems(ctx, raws)
	var retryAfter int
	if short := api.hashBulkPasswords(ctx, items); short != nil {
		retryAfter = short.retryAfter
	}
	results := make([]bulkResult, len(items))
	reqs := make([]fsm.CreateRequest, 0, len(items))
	at := make([]int, 0, len(items)) // the index in results of each of reqs
	for i := range items {
		if items[i].refused() {
			results[i] = items[i].refusal
			continue
		}
		reqs, at = append(reqs, items[i].req), append(at, i)
	}
	var index uint64
	if len(reqs) > 0 {
		created, last, err := api.writes.ProposeCreates(context.Background(), reqs).Wait()
		index = last
		for k, res := range created {
			results[at[k]] = api.bulkOutcome(ctx, res, reqs[k], err)
		}
	}
	markApplied(ctx, index)
	writeBulkResults(ctx, results, retryAfter)
}

// prepareBulkItems prepares each item as its own create would be: decoded,
// checked and authorized. No password is hashed yet.
func (api *bulkAPI) prepareBulkItems(ctx *fasthttp.RequestCtx, raws []json.RawMessage) []bulkItem {
	now, key := time.Now(), keyOf(ctx) // as a single create reads it
	workspace := defaultWorkspaceOf(key)
	items := make([]bulkItem, len(raws))
	for i, raw := range raws {
		items[i] = api.prepareBulkItem(raw, now, key, workspace)
	}
	return items
}

func (api *bulkAPI) prepareBulkItem(raw json.RawMessage, now time.Time, key *fsm.APIKey, workspace string) bulkItem {
	var f createFields
	err := decodeStrict(raw, &f)
	var it bulkItem
	if err == nil {
		it.req, it.password, err = api.input.validateCreate(&f, now, workspace)
	}
	if err == nil {
		err = createRefusal(key, &it.req, now)
	}
	if err != nil {
		return bulkItem{refusal: bulkResult{Status: statusOf(err), Error: err.Error()}}
	}
	if key != nil {
		it.req.KeyID = key.ID
	}
	return it
}

// hashBulkPasswords hashes the passwords of the items not refused, in
// order, as many as the request's hashing budget allows; the items past
// it are refused 429. It returns the shortfall, nil when none was refused.
func (api *bulkAPI) hashBulkPasswords(ctx *fasthttp.RequestCtx, items []bulkItem) *hashShortfall {
	wanted := 0
	for i := range items {
		if !items[i].refused() && items[i].password != "" {
			wanted++
		}
	}
	if wanted == 0 {
		return nil
	}
	granted, short := api.passwords.admit(ctx, wanted)
	for i := range items {
		it := &items[i]
		switch {
		case it.refused() || it.password == "":
			continue
		case granted == 0:
			it.refusal = bulkResult{Status: fasthttp.StatusTooManyRequests, Error: short.message()}
			continue
		}
		granted--
		hash, err := api.passwords.budget.hash(it.password)
		if err != nil {
			api.log.Error("hashing a link password failed", "err", err)
			it.refusal = bulkResult{Status: fasthttp.StatusInternalServerError, Error: "hashing the password failed"}
			continue
		}
		it.req.Options.PasswordHash = hash
	}
	return short
}

// bulkOutcome is what one proposed item ended in, with the status and
// message its own create would have had.
func (api *bulkAPI) bulkOutcome(ctx *fasthttp.RequestCtx, res fsm.CreateResult, req fsm.CreateRequest, writeErr error) bulkResult {
	switch {
	case res.Err == nil && res.Existing:
		v := api.views.linkView(ctx, &res.Link)
		v.Existing = true
		return bulkResult{Status: fasthttp.StatusOK, Link: &v}
	case res.Err == nil:
		v := api.views.linkView(ctx, &res.Link)
		return bulkResult{Status: fasthttp.StatusCreated, Link: &v}
	}
	row, refused := errorStatusOf(res.Err)
	status := row.status
	if !refused {
		status = fasthttp.StatusServiceUnavailable // the write failed: not applied, or unknown
	}
	detail, ok := detailOf(res.Err, createErrorDetails(req))
	if !ok {
		detail = res.Err.Error()
	}
	return bulkResult{Status: status, Error: detail}
}
