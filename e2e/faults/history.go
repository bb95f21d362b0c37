package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"sync"
)

// Kind is what an operation did.
type Kind string

// Operation kinds. Final is a HEAD /{code} the harness sends to every node
// after healing every fault; it is a read like Redirect.
const (
	Create   Kind = "create"   // POST /api/v1/urls with a unique URL
	Dedupe   Kind = "dedupe"   // POST /api/v1/urls with dedupe in workspace w
	Custom   Kind = "custom"   // POST /api/v1/urls with a custom_code raced by several clients
	Redirect Kind = "redirect" // GET /{code}
	Read     Kind = "read"     // GET /api/v1/urls/{code}
	Delete   Kind = "delete"   // DELETE /api/v1/urls/{code}
	Edit     Kind = "edit"     // PATCH /api/v1/urls/{code} with a new original_url
	Final    Kind = "final"    // HEAD /{code} after healing
)

// Outcome is what the client learned about an operation's effect.
type Outcome string

// Outcomes: Ok (the answer says it happened), Fail (a definite refusal, 4xx,
// or a definite miss) and Info (indeterminate: a timeout, a connection
// error or a 5xx; it may or may not have taken effect).
const (
	Ok   Outcome = "ok"
	Fail Outcome = "fail"
	Info Outcome = "info"
)

// Op is one recorded operation. Times are nanoseconds on the monotonic
// clock since the run started.
type Op struct {
	ID       int     `json:"id"`
	Client   int     `json:"client"`
	Kind     Kind    `json:"kind"`
	Node     string  `json:"node"`
	URL      string  `json:"url,omitempty"`      // target sent (creates, edits)
	Code     string  `json:"code,omitempty"`     // code sent (custom, reads, deletes, edits) or returned (creates)
	Invoke   int64   `json:"invoke"`             // ns since start
	Complete int64   `json:"complete"`           // ns since start
	Outcome  Outcome `json:"outcome"`            // ok, fail, info
	Status   int     `json:"status"`             // HTTP status, 0 without an answer
	RespURL  string  `json:"resp_url,omitempty"` // original_url answered (creates, edits, reads), or Location of a redirect
	Existing bool    `json:"existing,omitempty"` // create answered 200 existing
	Err      string  `json:"error,omitempty"`    // transport error or problem detail
}

// IsRead reports whether the operation only reads a code.
func (o Op) IsRead() bool { return o.Kind == Redirect || o.Kind == Read || o.Kind == Final }

// IsCreate reports whether the operation creates (or may create) a link.
func (o Op) IsCreate() bool { return o.Kind == Create || o.Kind == Dedupe || o.Kind == Custom }

// Found reports whether a read saw the code live (302 or 200) and, if so,
// the URL it pointed at.
func (o Op) Found() (string, bool) {
	if !o.IsRead() || o.Outcome != Ok {
		return "", false
	}
	return o.RespURL, o.Status == 302 || o.Status == 200
}

// Missing reports whether a read answered a definite 404.
func (o Op) Missing() bool { return o.IsRead() && o.Status == 404 }

// Acked reports whether a create was acknowledged with a code (201 or 200).
func (o Op) Acked() bool { return o.IsCreate() && o.Outcome == Ok && o.Code != "" }

// EditAcked reports whether an edit was answered 200: it took effect, and
// every node that reaches the leader shows its target from then on.
func (o Op) EditAcked() bool { return o.Kind == Edit && o.Outcome == Ok }

// MayHaveEdited reports whether an edit took or may have taken effect:
// answered 200, or indeterminate (a timeout, a lost answer, a 5xx). An
// indeterminate edit may take effect any time after it was sent.
func (o Op) MayHaveEdited() bool { return o.Kind == Edit && o.Outcome != Fail }

// EditTarget is the target an edit sets: the URL it sent. Not the
// original_url its 200 answered: the leader reads the link back after
// applying the edit, so an edit applied in between shows there instead.
func (o Op) EditTarget() string { return o.URL }

// History is every recorded operation, safe for concurrent appends.
type History struct {
	mu  sync.Mutex
	ops []Op
}

// Add records an operation and gives it the next id.
func (h *History) Add(op Op) Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops)
	h.ops = append(h.ops, op)
	return op
}

// Ops returns a copy of the operations ordered by invoke time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	ops := append([]Op(nil), h.ops...)
	h.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
	return ops
}

// WriteJSONL writes one JSON object per operation.
func WriteJSONL(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("encode op %d: %w", op.ID, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// ReadJSONL reads what WriteJSONL wrote.
func ReadJSONL(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	for dec.More() {
		var op Op
		if err := dec.Decode(&op); err != nil {
			return ops, fmt.Errorf("decode op after %d ops: %w", len(ops), err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}
