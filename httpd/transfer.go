package httpd

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// transferAPI serves the export and the import of links as JSON Lines.
type transferAPI struct {
	fsm    *fsm.FSM
	writes Writes
	// self says whether this node leads, which an import is read on
	// (importRoute); admin spools an export.
	self  Self
	admin Admin
	views linkViews
	input linkInput
	log   *slog.Logger
}

func (api *transferAPI) register(rt routing) {
	rt.adminRead("GET", "/admin/export", "admin_export", api.handleExport)
	// An import is read as it is imported, and forwarded only once read
	// whole (importRoute), to a leader that knows every field it may carry.
	imp := api.importRoute(rt.forwarder(api.handleImport, forwardAdmin.needs(fsm.LevelImport)))
	rt.handle("POST", "/admin/import", "admin_import", rt.require(fsm.ScopeAdmin, imp))
}

// exportPage is how many links an export reads from the state at a time.
const exportPage = 1024

// handleExport writes every link as JSON Lines, oldest first, in the shape
// of the single read. It reads the links a page at a time: a node holds a
// page of them, not the state, and applies entries between pages, so an
// export is not a snapshot of one moment (a backup is).
func (api *transferAPI) handleExport(ctx *fasthttp.RequestCtx) {
	ok := answerSpooled(ctx, api.admin, api.log, "export", func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for after := uint64(0); ; {
			links, next := api.fsm.LinksAfter(after, exportPage)
			for i := range links {
				if err := enc.Encode(api.views.linkReadView(ctx, &links[i])); err != nil {
					return err
				}
			}
			if next == 0 {
				return nil
			}
			after = next
		}
	})
	if ok {
		ctx.SetContentType("application/x-ndjson")
	}
}

// importLine is one line of an import: an exported link. Codes, targets,
// workspaces, domains, expiry, options, creation times and click totals
// are kept; histories, clicks per hour, visitors and last access start
// afresh (backup and restore copy everything). An export never holds a
// password, so a line marked password_protected without one is refused
// rather than imported open.
//
// created_at and clicks are what only an import may set (a create refuses
// them as unknown fields): a link moving from elsewhere was created and
// clicked before it got here. click_count is the same total under the name
// an export writes it.
type importLine struct {
	ShortCode         string          `json:"short_code"`
	OriginalURL       string          `json:"original_url"`
	Workspace         string          `json:"workspace"`
	ExpiresAt         *string         `json:"expires_at"`
	Domain            string          `json:"domain"`
	PasswordProtected bool            `json:"password_protected"`
	CreatedAt         *string         `json:"created_at"`
	Clicks            json.RawMessage `json:"clicks"`
	ClickCount        json.RawMessage `json:"click_count"`
	optionFields
	// Written by an export and not imported: a link gets its id and
	// short URL here, and its last access starts afresh. Any other field
	// is refused: one this build does not know (a password hash) must not
	// import a link that is open where it was closed.
	ID             json.RawMessage `json:"id"`
	ShortURL       json.RawMessage `json:"short_url"`
	Existing       json.RawMessage `json:"existing"`
	LastAccessedAt json.RawMessage `json:"last_accessed_at"`
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
	data   []byte // the lines, as read from the body
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

// importRoute serves an import here when this node leads, reading the
// body as a stream (see readBody) as it imports it. Anywhere else next,
// the forwarder, sends the body on to the leader as it reads it, and the
// leader's cluster port imports it as it arrives: no node holds an import
// whole. Should this node lose leadership during the import, its proposals
// fail and the remaining lines are reported not attempted, as when that
// happens to a forwarded import.
//
// The leader checks each line's entry level itself (a line the cluster
// cannot store yet fails alone); the forwarder asks for the newest level
// an import can need, since a leader of an older build would drop what it
// does not know, such as creation times and clicks, without saying so.
func (api *transferAPI) importRoute(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if api.self.IsLeader() {
			api.handleImport(ctx)
			return
		}
		next(ctx)
		// This node applied the import's entries too, and what applying
		// them left is garbage now: hand it back at once, as the leader
		// does (ImportDone), rather than keep it until the heap grows
		// into it.
		go debug.FreeOSMemory()
	}
}

// handleImport creates the links of a JSON Lines body with their codes. A
// line whose code already points to the same URL is skipped; every other
// refusal is reported with its line number and changes nothing. Once the
// cluster cannot take writes, the remaining lines are not attempted.
func (api *transferAPI) handleImport(ctx *fasthttp.RequestCtx) {
	var body io.Reader
	streamed := streamedBodyOf(ctx)
	if streamed != nil {
		body = streamed
	} else {
		body = bytes.NewReader(ctx.PostBody())
	}
	report, index, read := api.importBody(body, keyID(ctx))
	// The import's chunks, parsed lines and results are garbage now, and
	// its log entries and the pages of raft.db they touched are kept for
	// nothing: the node puts them away and hands the memory back to the
	// operating system (as after a restore) while the answer goes out.
	go api.writes.ImportDone()
	if read.err != nil {
		status := fasthttp.StatusBadRequest
		var timeout interface{ Timeout() bool }
		switch {
		case errors.Is(read.err, fasthttp.ErrBodyTooLarge):
			status = fasthttp.StatusRequestEntityTooLarge
		case errors.As(read.err, &timeout) && timeout.Timeout():
			status = fasthttp.StatusRequestTimeout
		}
		writeProblem(ctx, status, fmt.Sprintf("the body could not be read after line %d (%v); the lines up to it were imported: %d created, %d skipped, %d failed",
			read.lines, read.err, report.Created, report.Skipped, len(report.Failed)))
		return
	}
	markApplied(ctx, index)
	writeJSON(ctx, fasthttp.StatusOK, report)
}

// importRead is how far the import read its body: the lines it cut, and
// the error that ended the reading early (nil: the body was read whole).
type importRead struct {
	lines int
	err   error
}

// importBody imports the lines of body as key keyID and returns the
// report, the highest log index its entries were applied at (0: none
// was), and how far body was read.
func (api *transferAPI) importBody(body io.Reader, keyID string) (importReport, uint64, importRead) {
	order := make(chan *importChunk, importReadAhead())
	work := make(chan *importChunk, importReadAhead())
	var read importRead // written by cutImport before it closes order
	go func() {
		read = cutImport(body, order, work)
		close(order) // after read is set: the proposer reads it once order ends
		close(work)
	}()
	var parsers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		parsers.Add(1)
		go func() {
			defer parsers.Done()
			for c := range work {
				c.parsed <- api.parseChunk(c)
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
			if i := api.tally(&report, p, &stopped); i > index {
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
			p.bulk = api.writes.ProposeCreates(context.Background(), p.reqs)
		}
		proposed <- p
	}
	close(proposed)
	<-done
	slices.SortFunc(report.Failed, func(a, b importFailure) int { return cmp.Compare(a.Line, b.Line) })
	return report, index, read
}

// cutImport reads body and sends its chunks, in order, to order (for the
// proposer) and work (for the parsers). order is sent first and is
// bounded: parsing runs at most its capacity ahead of proposing, and
// reading no further ahead than parsing, so an import holds a few chunks
// of its body at a time, never the whole. Each chunk's bytes are its own:
// they are garbage once its lines are proposed. A read error ends the body
// early; the incomplete chunk it interrupted is dropped. The caller closes
// order and work once it returns.
func cutImport(body io.Reader, order, work chan<- *importChunk) importRead {
	br := bufio.NewReaderSize(body, 64<<10)
	line := 1
	size := 0 // of the last chunk: the next one is likely as large
	for {
		data := make([]byte, 0, size)
		n := 0
		var err error
		for n < importChunkLines {
			var piece []byte
			piece, err = br.ReadSlice('\n')
			data = append(data, piece...)
			if err == bufio.ErrBufferFull { // a line longer than the buffer: its next piece
				continue
			}
			if err != nil {
				if len(piece) > 0 && err == io.EOF { // a last line without a newline
					n++
				}
				break
			}
			n++
		}
		if err != nil && err != io.EOF {
			return importRead{lines: line - 1, err: err}
		}
		size = len(data)
		if n > 0 {
			c := &importChunk{first: line, data: data, parsed: make(chan parsedChunk, 1)}
			order <- c
			work <- c
			line += n
		}
		if err == io.EOF {
			return importRead{lines: line - 1}
		}
	}
}

// parseChunk parses and validates a chunk's lines. Blank lines are no
// links and are not reported.
func (api *transferAPI) parseChunk(c *importChunk) parsedChunk {
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
			if req, err := api.parseImportLineSafe(raw); err != nil {
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
func (api *transferAPI) tally(r *importReport, p proposedChunk, stopped *atomic.Pointer[error]) uint64 {
	if p.bulk == nil && p.stop == nil { // every line was refused before proposing
		r.Failed = append(r.Failed, p.failed...)
		return 0
	}
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
			if l, ok := api.fsm.Get(fsm.QualifiedCode(req.Domain, req.CustomCode)); ok && l.URL == req.URL && l.Workspace == req.Workspace {
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
func (api *transferAPI) parseImportLineSafe(raw []byte) (req fsm.CreateRequest, err error) {
	defer func() {
		if v := recover(); v != nil {
			api.log.Error("import line panic", "panic", v)
			req, err = fsm.CreateRequest{}, errors.New("internal error")
		}
	}()
	return api.parseImportLine(raw)
}

// decodeImportLine decodes one line, refusing a field an import does not
// have.
func decodeImportLine(raw []byte) (importLine, error) {
	var l importLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&l)
	if err == nil {
		return l, nil
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return l, fmt.Errorf("unknown field %s: an import does not have it", field)
	}
	// The decoder's own words for what is not JSON, as Unmarshal says them.
	if uerr := json.Unmarshal(raw, &l); uerr != nil {
		err = uerr
	}
	return l, errors.New("not a JSON object: " + err.Error())
}

// parseImportLine reads and validates one line. The error is the line's
// entry in the report.
func (api *transferAPI) parseImportLine(raw []byte) (fsm.CreateRequest, error) {
	l, err := decodeImportLine(raw)
	if err != nil {
		return fsm.CreateRequest{}, err
	}
	target, err := input.Target(l.OriginalURL, api.input.allowPrivateTargets)
	if err != nil {
		return fsm.CreateRequest{}, err
	}
	if err := input.CustomCode(l.ShortCode); err != nil {
		return fsm.CreateRequest{}, err
	}
	req := fsm.CreateRequest{URL: target, CustomCode: l.ShortCode, Workspace: defaultWorkspace, CodeLength: api.input.codeLength}
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
	if l.Domain != "" {
		if req.Domain, err = input.Domain(l.Domain); err != nil {
			return req, err
		}
	}
	if req.CreatedAt, err = importedCreatedAt(l.CreatedAt, time.Now()); err != nil {
		return req, err
	}
	if req.Clicks, err = importedClicks(l.Clicks, l.ClickCount); err != nil {
		return req, err
	}
	if l.PasswordProtected && (l.Password == nil || isNull(l.Password)) {
		return req, errors.New("the link is password-protected and exports never carry the password: add \"password\" to the line, or set it after the import")
	}
	opts, password, err := api.input.edit(&l.optionFields)
	if err != nil {
		return req, err
	}
	if password != "" {
		// Not from the hashing budget: an import is the operator's own
		// work (it needs an admin key), spread over the parse workers.
		if opts.PasswordHash, err = hashLinkPassword(password); err != nil {
			return req, err
		}
	}
	req.Options = optionsOf(opts)
	return req, nil
}

// importedCreatedAt reads a line's created_at: unix milliseconds, 0 when
// the line has none (the link is then created at the import's time). A
// link was created after 1970 (0 would mean "none") and not after now: the
// state machine refuses what is later than the leader's clock when it
// proposes the line.
func importedCreatedAt(v *string, now time.Time) (int64, error) {
	if v == nil {
		return 0, nil
	}
	at, err := time.Parse(time.RFC3339, *v)
	switch {
	case err != nil:
		return 0, errors.New("created_at is not an RFC 3339 time")
	case at.UnixMilli() <= 0:
		return 0, errors.New("created_at must be after 1970-01-01T00:00:00Z")
	case at.UnixMilli() > now.UnixMilli():
		return 0, fmt.Errorf("created_at %s is in the future", at.UTC().Format(time.RFC3339))
	}
	return at.UnixMilli(), nil
}

// importedClicks reads a line's click total from clicks or, as an export
// writes it, click_count: a whole number from 0 to fsm.MaxImportedClicks.
// Both may be given when they agree.
func importedClicks(clicks, clickCount json.RawMessage) (uint64, error) {
	var total uint64
	given := ""
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"clicks", clicks}, {"click_count", clickCount}} {
		if f.raw == nil || isNull(f.raw) {
			continue
		}
		// ParseUint takes digits only: a sign, a fraction, an exponent or
		// quotes are refused, never rounded.
		n, err := strconv.ParseUint(string(bytes.TrimSpace(f.raw)), 10, 64)
		if err != nil || n > fsm.MaxImportedClicks {
			return 0, fmt.Errorf("%s must be a whole number from 0 to %d", f.name, uint64(fsm.MaxImportedClicks))
		}
		if given != "" && n != total {
			return 0, fmt.Errorf("%s and %s differ", given, f.name)
		}
		total, given = n, f.name
	}
	return total, nil
}
