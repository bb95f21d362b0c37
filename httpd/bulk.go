package httpd

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

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

// handleBulk creates up to maxBulkLinks links from one request. It runs
// on the leader (the route forwards it), which packs the valid items into
// a few log entries; each item is answered as its own create would be.
func (s *Server) handleBulk(ctx *fasthttp.RequestCtx) {
	var body struct {
		Links []json.RawMessage `json:"links"`
	}
	if err := decodeStrict(ctx.PostBody(), &body); err != nil {
		writeBadRequest(ctx, err)
		return
	}
	if len(body.Links) == 0 || len(body.Links) > maxBulkLinks {
		writeProblem(ctx, fasthttp.StatusBadRequest, "links must hold 1 to "+strconv.Itoa(maxBulkLinks)+" create bodies, got "+strconv.Itoa(len(body.Links)))
		return
	}
	results := make([]bulkResult, len(body.Links))
	reqs := make([]fsm.CreateRequest, 0, len(body.Links))
	items := make([]int, 0, len(body.Links)) // results index of each of reqs
	now, workspace := ctx.Time(), defaultWorkspaceOf(keyOf(ctx))
	for i, raw := range body.Links {
		req, status, msg := s.bulkItem(ctx, raw, now, workspace)
		if status != 0 {
			results[i] = bulkResult{Status: status, Error: msg}
			continue
		}
		reqs, items = append(reqs, req), append(items, i)
	}
	var index uint64
	if len(reqs) > 0 {
		created, last, err := s.node.Writes.ProposeCreates(context.Background(), reqs).Wait()
		index = last
		for k, res := range created {
			results[items[k]] = s.bulkOutcome(ctx, res, reqs[k], err)
		}
	}
	markApplied(ctx, index)
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"results": results})
}

// bulkItem prepares one item as a create; a non-zero status is its refusal.
func (s *Server) bulkItem(ctx *fasthttp.RequestCtx, raw json.RawMessage, now time.Time, workspace string) (fsm.CreateRequest, int, string) {
	var f createFields
	if err := decodeStrict(raw, &f); err != nil {
		return fsm.CreateRequest{}, fasthttp.StatusBadRequest, err.Error()
	}
	req, err := s.validateCreate(&f, now, workspace)
	if err == nil {
		err = createRefusal(keyOf(ctx), &req, now)
	}
	if err != nil {
		return req, statusOf(err), err.Error()
	}
	req.KeyID = keyID(ctx)
	return req, 0, ""
}

// bulkOutcome is what one proposed item ended in, with the status and
// message its own create would have had.
func (s *Server) bulkOutcome(ctx *fasthttp.RequestCtx, res fsm.CreateResult, req fsm.CreateRequest, writeErr error) bulkResult {
	switch {
	case res.Err == nil && res.Existing:
		v := s.linkView(ctx, &res.Link)
		v.Existing = true
		return bulkResult{Status: fasthttp.StatusOK, Link: &v}
	case res.Err == nil:
		v := s.linkView(ctx, &res.Link)
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
