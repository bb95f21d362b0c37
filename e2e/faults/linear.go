package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Each code is a register that is created once, read, edited and deleted:
// absent -> present(url) -> present(url') ... -> deleted, and never back.
// An edit writes the register's URL; a read returns the latest written.
type regState struct {
	phase int // 0 absent, 1 present, 2 deleted
	url   string
}

const (
	absent = iota
	present
	deleted
)

// regInput is an operation on one code's register.
type regInput struct {
	op  string // "create", "get", "edit", "delete"
	url string // URL a create or an edit sends
	// raced: an edit answered 404 while a delete of the code was under way
	// or done, so it may have been applied just before the delete (the
	// leader answers 404 when the link is gone right after the edit).
	raced bool
}

// regOutput is what the operation answered.
type regOutput struct {
	outcome Outcome
	// url: the URL a create answered, or a get found ("" for a miss). For
	// an edit, the URL its 200 answered, shown in visualisations only: the
	// model writes the URL the edit sent, as the answer is the link read
	// back after the edit applied (CheckNoOlderTargetAfterEdit judges it).
	url      string
	existing bool // create answered 200 existing (dedupe)
}

// registerModel is the per-code register as a nondeterministic model: an
// indeterminate create, edit or delete may or may not have taken effect.
func registerModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{regState{}} },
		Step: func(state, input, output any) []any {
			return regStep(state.(regState), input.(regInput), output.(regOutput))
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(regInput), output.(regOutput)
			return fmt.Sprintf("%s(%s) -> %s %s", in.op, in.url, out.outcome, out.url)
		},
		DescribeState: func(state any) string {
			s := state.(regState)
			return [...]string{"absent", "present " + s.url, "deleted"}[s.phase]
		},
	}
	return nm.ToModel()
}

func regStep(s regState, in regInput, out regOutput) []any {
	switch in.op {
	case "create":
		return createStep(s, in, out)
	case "edit":
		return editStep(s, in, out)
	case "delete":
		return deleteStep(s, out)
	default:
		return getStep(s, out)
	}
}

func createStep(s regState, in regInput, out regOutput) []any {
	switch {
	case out.outcome == Info && s.phase == absent:
		return []any{s, regState{phase: present, url: in.url}}
	case out.outcome == Info:
		return []any{s}
	case out.outcome == Fail && s.phase != absent: // 409: taken or deleted before
		return []any{s}
	case out.outcome == Ok && out.existing && s.phase == present && s.url == out.url:
		return []any{s}
	case out.outcome == Ok && !out.existing && s.phase == absent:
		return []any{regState{phase: present, url: out.url}}
	}
	return nil
}

// editStep: a 200 edit of a present code writes its URL; an indeterminate
// one may have; a 404 says the code is not present, unless it raced a
// delete (then it may also have been applied just before the delete).
// Edits refused for other reasons never reach the model (see toPorcupine).
func editStep(s regState, in regInput, out regOutput) []any {
	switch {
	case out.outcome == Ok && s.phase == present:
		return []any{regState{phase: present, url: in.url}}
	case out.outcome == Info && s.phase == present:
		return []any{s, regState{phase: present, url: in.url}}
	case out.outcome == Info:
		return []any{s}
	case out.outcome == Fail && s.phase != present:
		return []any{s}
	case out.outcome == Fail && in.raced:
		return []any{regState{phase: present, url: in.url}}
	}
	return nil
}

func deleteStep(s regState, out regOutput) []any {
	switch {
	case out.outcome == Info && s.phase == present:
		return []any{s, regState{phase: deleted}}
	case out.outcome == Info:
		return []any{s}
	case out.outcome == Ok && s.phase == present:
		return []any{regState{phase: deleted}}
	case out.outcome == Fail && s.phase != present:
		return []any{s}
	}
	return nil
}

func getStep(s regState, out regOutput) []any {
	if (out.url == "" && s.phase != present) || (out.url != "" && s.phase == present && s.url == out.url) {
		return []any{s}
	}
	return nil
}

// LinearizabilityResult is the verdict for the whole history.
type LinearizabilityResult struct {
	Codes, Illegal, Unknown, DroppedReads int
	Anomalies                             []Anomaly
	HTML                                  []string // visualisations written
}

// CheckLinearizable checks every code's operations against the register
// model with porcupine. Reads without a definite answer are dropped (they
// change nothing), and so are reads on a node inside a fault window: a node
// cut off from the leader serves its local state by design; and reads that
// overlap an edit or delete of their code (duringChange). Indeterminate
// creates, edits and deletes stay open until after the end of the history.
// For each illegal code (at most maxHTML) an HTML visualisation is written
// into htmlDir when it is not empty.
func CheckLinearizable(ops []Op, windows []Window, htmlDir string, timeout time.Duration) LinearizabilityResult {
	var res LinearizabilityResult
	end := endOfHistory(ops)
	model := registerModel()
	perCode := codeIndex(ops)
	for _, code := range keys(perCode) {
		hist, dropped := porcupineHistory(perCode[code], windows, end)
		res.DroppedReads += dropped
		res.Codes++
		verdict, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
		switch verdict {
		case porcupine.Unknown:
			res.Unknown++
		case porcupine.Illegal:
			res.Illegal++
			res.Anomalies = append(res.Anomalies, Anomaly{Checker: "linearizable", Code: code, Ops: opIDs(hist), Detail: fmt.Sprintf("%d operations on the code have no linearization", len(hist))})
			res.HTML = appendHTML(res.HTML, model, info, htmlDir, code)
		}
	}
	return res
}

// maxHTML bounds how many visualisations one check writes.
const maxHTML = 20

func appendHTML(files []string, model porcupine.Model, info porcupine.LinearizationInfo, dir, code string) []string {
	if dir == "" || len(files) >= maxHTML {
		return files
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return files
	}
	path := filepath.Join(dir, "linearizability-"+code+".html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return files
	}
	return append(files, path)
}

func endOfHistory(ops []Op) int64 {
	var end int64
	for _, op := range ops {
		end = max(end, op.Complete, op.Invoke)
	}
	return end + int64(time.Second)
}

// porcupineHistory turns one code's operations into porcupine operations.
// A code that some create acknowledged but no create of it was recorded
// for (a dedupe create whose answer was lost made it) gets an open create
// from the start of the history.
func porcupineHistory(cops []Op, windows []Window, end int64) ([]porcupine.Operation, int) {
	var hist []porcupine.Operation
	dropped := 0
	creates := 0
	for _, op := range cops {
		po, keep := toPorcupine(op, windows, end, cops)
		if !keep {
			if op.IsRead() {
				dropped++
			}
			continue
		}
		if op.IsCreate() && (op.Status == 201 || op.Outcome == Info) {
			creates++
		}
		hist = append(hist, po)
	}
	if creates == 0 {
		if target, _, ok := ackedTarget(cops); ok {
			hist = append(hist, porcupine.Operation{ClientId: 0, Input: regInput{op: "create", url: target}, Call: 0, Output: regOutput{outcome: Info}, Return: end, Metadata: -1})
		}
	}
	sort.SliceStable(hist, func(i, j int) bool { return hist[i].Call < hist[j].Call })
	return hist, dropped
}

// toPorcupine turns one operation into a porcupine operation, or drops
// it: a read without a definite answer or on a node inside a fault window,
// and an edit or a delete refused with anything but 404 (a 400 or 401
// changes nothing and says nothing about the register).
func toPorcupine(op Op, windows []Window, end int64, cops []Op) (porcupine.Operation, bool) {
	po := porcupine.Operation{ClientId: max(op.Client, 0), Call: op.Invoke, Return: op.Complete, Metadata: op.ID}
	switch {
	case op.IsRead():
		u, found := op.Found()
		if (!found && !op.Missing()) || affected(windows, op) || duringChange(op, cops) {
			return po, false
		}
		po.Input, po.Output = regInput{op: "get"}, regOutput{outcome: Ok, url: u}
	case op.IsCreate():
		po.Input, po.Output = regInput{op: "create", url: op.URL}, regOutput{outcome: op.Outcome, url: createdURL(op), existing: op.Existing}
	case op.Kind == Edit:
		if op.Outcome == Fail && op.Status != 404 {
			return po, false
		}
		po.Input = regInput{op: "edit", url: op.URL, raced: raced404(op, cops)}
		po.Output = regOutput{outcome: op.Outcome, url: op.RespURL}
	case op.Kind == Delete:
		if op.Outcome == Fail && op.Status != 404 {
			return po, false // refused (a 401, a 400): it says nothing of the register
		}
		po.Input, po.Output = regInput{op: "delete"}, regOutput{outcome: op.Outcome}
	default:
		return po, false
	}
	if op.Outcome == Info {
		po.Return = end
	}
	return po, true
}

// duringChange reports whether a read overlaps an edit or a delete of its
// code. Nodes apply a write one after another, and each serves reads from
// what it has applied: while the write is under way, one node may already
// answer the new target and another, asked a moment later, the old one.
// What linkraft promises starts at the write's answer (every node that
// reaches the leader shows it from then on), which the read-after-edit and
// read-after-delete checks hold every read to; such overlapping reads are
// left out of the linearizability check rather than held to more.
func duringChange(read Op, cops []Op) bool {
	for _, w := range cops {
		if (w.Kind == Edit || w.Kind == Delete) && w.Outcome != Fail && w.Invoke < read.Complete && read.Invoke < w.Complete {
			return true
		}
	}
	return false
}

func opIDs(hist []porcupine.Operation) []int {
	var ids []int
	for _, po := range hist {
		if id, ok := po.Metadata.(int); ok && id >= 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) > 12 {
		ids = ids[:12]
	}
	return ids
}
