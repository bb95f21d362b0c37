package httpd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/httpd/input"
)

// handleExport writes every link as JSON Lines, oldest first, in the shape
// of the single read.
func (s *Server) handleExport(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/x-ndjson")
	enc := json.NewEncoder(ctx)
	enc.SetEscapeHTML(false)
	for _, l := range s.fsm.Links() {
		if err := enc.Encode(s.linkReadView(ctx, &l)); err != nil {
			writeProblem(ctx, fasthttp.StatusInternalServerError, "export failed")
			return
		}
	}
}

// importLine is one line of an import: an exported link. Codes, targets,
// workspaces and expiry are kept; creation times and clicks start afresh
// (backup and restore copy everything).
type importLine struct {
	ShortCode   string  `json:"short_code"`
	OriginalURL string  `json:"original_url"`
	Workspace   string  `json:"workspace"`
	ExpiresAt   *string `json:"expires_at"`
}

type importFailure struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

type importReport struct {
	Created int             `json:"created"`
	Skipped int             `json:"skipped"`
	Failed  []importFailure `json:"failed"`
}

// An import is a pipeline: one goroutine cuts the body into chunks of
// importChunkLines lines, one worker per core parses and validates chunks,
// and the handler proposes them in the body's order (Node.ProposeCreates
// packs each into full log entries) while a collector waits for them and
// tallies the report. Order matters: of two lines with the same code the
// earlier one wins, as in a sequential import.
//
// importInflight chunks may be in Raft at once: Raft group-commits what is
// queued into one write, and the FSM applies some entries while the next
// are written. It also bounds how long the FSM's write lock, which
// redirects wait for, is held at once: Raft applies what committed
// together under one lock. importReadAhead bounds the chunks parsed and
// waiting to be proposed; with the chunks in flight that is what the
// import holds beyond the body (about 10 MiB for ordinary links).
const (
	importChunkLines = 2048
	importInflight   = 8
)

func importReadAhead() int { return 2*runtime.GOMAXPROCS(0) + 2 }

// importChunk is a run of whole lines of the body.
type importChunk struct {
	first  int    // line number of data's first line
	data   []byte // the lines, a slice of the body (never copied)
	parsed chan parsedChunk
}

// parsedChunk is a chunk's lines ready to propose, in order, and the lines
// refused before proposing.
type parsedChunk struct {
	reqs   []fsm.CreateRequest
	lines  []int // line number of each of reqs
	failed []importFailure
}

// proposedChunk is a parsed chunk handed to Raft, or not attempted.
type proposedChunk struct {
	parsedChunk
	bulk *cluster.BulkCreates // nil: not attempted
	stop error                // why not
}

// handleImport creates the links of a JSON Lines body with their codes. A
// line whose code already points to the same URL is skipped; every other
// refusal is reported with its line number and changes nothing. Once the
// cluster cannot take writes, the remaining lines are not attempted.
func (s *Server) handleImport(ctx *fasthttp.RequestCtx) {
	report, index := s.importBody(ctx.PostBody(), keyID(ctx))
	if index > 0 && len(ctx.Request.Header.Peek(wire.ForwardedHeader)) > 0 {
		// The forwarding node applies this far before its client hears,
		// so the imported links redirect there once the answer arrives.
		ctx.Response.Header.Set(wire.AppliedIndexHeader, strconv.FormatUint(index, 10))
	}
	writeJSON(ctx, fasthttp.StatusOK, report)
}

// importBody imports the lines of body as key keyID and returns the
// report and the highest log index its entries were applied at (0: none
// was).
func (s *Server) importBody(body []byte, keyID string) (importReport, uint64) {
	order := make(chan *importChunk, importReadAhead())
	work := make(chan *importChunk, importReadAhead())
	go cutImport(body, order, work)
	var parsers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		parsers.Add(1)
		go func() {
			defer parsers.Done()
			for c := range work {
				c.parsed <- s.parseChunk(c)
			}
		}()
	}
	defer parsers.Wait()

	proposed := make(chan proposedChunk, importInflight)
	var stopped atomic.Pointer[error] // the write error that ends the import
	done := make(chan struct{})
	report := importReport{Failed: []importFailure{}}
	var index uint64
	go func() {
		defer close(done)
		for p := range proposed {
			if i := s.tally(&report, p, &stopped); i > index {
				index = i
			}
		}
	}()
	for c := range order {
		p := proposedChunk{parsedChunk: <-c.parsed}
		if stop := stopped.Load(); stop != nil {
			p.stop = *stop
		} else if len(p.reqs) > 0 {
			for i := range p.reqs {
				p.reqs[i].KeyID = keyID
			}
			p.bulk = s.node.Writes.ProposeCreates(context.Background(), p.reqs)
		}
		proposed <- p
	}
	close(proposed)
	<-done
	slices.SortFunc(report.Failed, func(a, b importFailure) int { return cmp.Compare(a.Line, b.Line) })
	return report, index
}

// cutImport sends the body's chunks, in order, to order (for the proposer)
// and work (for the parsers). order is sent first and is bounded: parsing
// runs at most its capacity ahead of proposing.
func cutImport(body []byte, order, work chan<- *importChunk) {
	defer close(work)
	defer close(order)
	line := 1
	for len(body) > 0 {
		end, n := 0, 0
		for n < importChunkLines && end < len(body) {
			if i := bytes.IndexByte(body[end:], '\n'); i >= 0 {
				end += i + 1
			} else {
				end = len(body)
			}
			n++
		}
		c := &importChunk{first: line, data: body[:end], parsed: make(chan parsedChunk, 1)}
		order <- c
		work <- c
		body, line = body[end:], line+n
	}
}

// parseChunk parses and validates a chunk's lines. Blank lines are no
// links and are not reported.
func (s *Server) parseChunk(c *importChunk) parsedChunk {
	p := parsedChunk{
		reqs:  make([]fsm.CreateRequest, 0, importChunkLines),
		lines: make([]int, 0, importChunkLines),
	}
	data, line := c.data, c.first
	for len(data) > 0 {
		raw := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			if req, err := s.parseImportLineSafe(raw); err != nil {
				p.failed = append(p.failed, importFailure{Line: line, Error: err.Error()})
			} else {
				p.reqs = append(p.reqs, req)
				p.lines = append(p.lines, line)
			}
		}
		line++
	}
	return p
}

// tally adds a proposed chunk's outcome to the report, once Raft decided
// it, and returns the log index that decided it. A write error is stored in
// stopped: chunks proposed after it are not attempted.
func (s *Server) tally(r *importReport, p proposedChunk, stopped *atomic.Pointer[error]) uint64 {
	if p.bulk == nil {
		for _, f := range p.failed {
			r.Failed = append(r.Failed, importFailure{Line: f.Line, Error: "not attempted: " + p.stop.Error()})
		}
		for _, line := range p.lines {
			r.Failed = append(r.Failed, importFailure{Line: line, Error: "not attempted: " + p.stop.Error()})
		}
		return 0
	}
	r.Failed = append(r.Failed, p.failed...)
	results, index, err := p.bulk.Wait()
	if err != nil {
		stopped.CompareAndSwap(nil, &err)
	}
	for k, res := range results {
		req := &p.reqs[k]
		switch {
		case res.Err == nil:
			r.Created++
		case errors.Is(res.Err, fsm.ErrCodeTaken):
			if l, ok := s.fsm.Get(req.CustomCode); ok && l.URL == req.URL && l.Workspace == req.Workspace {
				r.Skipped++
			} else {
				r.Failed = append(r.Failed, importFailure{Line: p.lines[k], Error: "code " + req.CustomCode + " is taken by another link or was deleted"})
			}
		default:
			r.Failed = append(r.Failed, importFailure{Line: p.lines[k], Error: res.Err.Error()})
		}
	}
	return index
}

// parseImportLineSafe is parseImportLine on a parser goroutine, which the
// handler's panic recovery does not cover: a line that panics fails alone
// instead of taking the node down.
func (s *Server) parseImportLineSafe(raw []byte) (req fsm.CreateRequest, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("import line panic", "panic", v)
			req, err = fsm.CreateRequest{}, errors.New("internal error")
		}
	}()
	return s.parseImportLine(raw)
}

// parseImportLine reads and validates one line. The error is the line's
// entry in the report.
func (s *Server) parseImportLine(raw []byte) (fsm.CreateRequest, error) {
	var l importLine
	if err := json.Unmarshal(raw, &l); err != nil {
		return fsm.CreateRequest{}, errors.New("not a JSON object: " + err.Error())
	}
	target, err := input.Target(l.OriginalURL, s.cfg.AllowPrivateTargets)
	if err != nil {
		return fsm.CreateRequest{}, err
	}
	if err := input.CustomCode(l.ShortCode); err != nil {
		return fsm.CreateRequest{}, err
	}
	req := fsm.CreateRequest{URL: target, CustomCode: l.ShortCode, Workspace: defaultWorkspace, CodeLength: s.cfg.CodeLength}
	if l.Workspace != "" {
		if err := input.Workspace(l.Workspace); err != nil {
			return req, err
		}
		req.Workspace = l.Workspace
	}
	if l.ExpiresAt != nil {
		at, err := time.Parse(time.RFC3339, *l.ExpiresAt)
		if err != nil {
			return req, errors.New("expires_at is not an RFC 3339 time")
		}
		req.ExpiresAt = at.UnixMilli()
	}
	return req, nil
}
