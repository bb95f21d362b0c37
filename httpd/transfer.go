package httpd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

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

// importConcurrency bounds the creates an import keeps in flight; they are
// batched into shared log entries like any concurrent creates.
const importConcurrency = 64

// handleImport creates the links of a JSON Lines body with their codes. A
// line whose code already points to the same URL is skipped; every other
// refusal is reported with its line number and changes nothing.
func (s *Server) handleImport(ctx *fasthttp.RequestCtx) {
	report := importReport{Failed: []importFailure{}}
	var mu sync.Mutex
	fail := func(line int, msg string) {
		mu.Lock()
		report.Failed = append(report.Failed, importFailure{Line: line, Error: msg})
		mu.Unlock()
	}
	sem := make(chan struct{}, importConcurrency)
	var wg sync.WaitGroup
	var unavailable atomic.Pointer[error] // set once the cluster cannot take writes
	for i, raw := range bytes.Split(ctx.PostBody(), []byte("\n")) {
		line := i + 1
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if stop := unavailable.Load(); stop != nil {
			fail(line, "not attempted: "+(*stop).Error())
			continue
		}
		req, err := s.parseImportLine(raw)
		if err != nil {
			fail(line, err.Error())
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outcome, msg, err := s.importOne(req)
			if err != nil {
				unavailable.CompareAndSwap(nil, &err)
			}
			mu.Lock()
			defer mu.Unlock()
			switch outcome {
			case imported:
				report.Created++
			case skipped:
				report.Skipped++
			default:
				report.Failed = append(report.Failed, importFailure{Line: line, Error: msg})
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(report.Failed, func(a, b importFailure) int { return cmp.Compare(a.Line, b.Line) })
	writeJSON(ctx, fasthttp.StatusOK, report)
}

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

type importOutcome int

const (
	importFailed importOutcome = iota
	imported
	skipped
)

// importOne creates one line's link. The error is set when the cluster
// cannot take writes at all, which ends the import.
func (s *Server) importOne(req fsm.CreateRequest) (importOutcome, string, error) {
	res, err := s.node.Create(context.Background(), req)
	switch {
	case err != nil:
		return importFailed, err.Error(), err
	case res.Err == nil:
		return imported, "", nil
	case errors.Is(res.Err, fsm.ErrCodeTaken):
		if l, ok := s.fsm.Get(req.CustomCode); ok && l.URL == req.URL && l.Workspace == req.Workspace {
			return skipped, "", nil
		}
		return importFailed, "code " + req.CustomCode + " is taken by another link or was deleted", nil
	}
	return importFailed, res.Err.Error(), nil
}
