package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Anomaly is one violation a checker found.
type Anomaly struct {
	Checker string `json:"checker"`
	Code    string `json:"code,omitempty"`
	Node    string `json:"node,omitempty"`
	Ops     []int  `json:"ops,omitempty"` // ids of the operations involved
	Detail  string `json:"detail"`
}

func (a Anomaly) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]", a.Checker)
	if a.Code != "" {
		fmt.Fprintf(&b, " code %s", a.Code)
	}
	if a.Node != "" {
		fmt.Fprintf(&b, " on %s", a.Node)
	}
	fmt.Fprintf(&b, ": %s", a.Detail)
	if len(a.Ops) > 0 {
		fmt.Fprintf(&b, " (ops %v)", a.Ops)
	}
	return b.String()
}

// Window is a stretch of time during which the nodes listed may be cut off
// from the leader (a partition, a paused or dead leader, a restart), so
// their reads are not held to the read-after-write guarantees. No Nodes
// means every node.
type Window struct {
	Kind  string   `json:"kind"`
	Start int64    `json:"start"`
	End   int64    `json:"end"`
	Nodes []string `json:"nodes,omitempty"`
}

// affected reports whether op ran on a node inside one of the windows.
func affected(windows []Window, op Op) bool {
	for _, w := range windows {
		if op.Complete < w.Start || op.Invoke > w.End {
			continue
		}
		if len(w.Nodes) == 0 {
			return true
		}
		for _, n := range w.Nodes {
			if n == op.Node {
				return true
			}
		}
	}
	return false
}

// codeIndex groups operations by code.
func codeIndex(ops []Op) map[string][]Op {
	idx := map[string][]Op{}
	for _, op := range ops {
		if op.Code != "" {
			idx[op.Code] = append(idx[op.Code], op)
		}
	}
	return idx
}

// deletedBy returns the earliest invoke time of a delete of the code that
// took or may have taken effect, and whether there is one.
func deletedBy(ops []Op) (int64, bool) {
	var first int64
	found := false
	for _, op := range ops {
		if op.Kind == Delete && op.Outcome != Fail && (!found || op.Invoke < first) {
			first, found = op.Invoke, true
		}
	}
	return first, found
}

// ackedTarget returns the URL the code was acknowledged with and when the
// first acknowledgement completed.
func ackedTarget(ops []Op) (target string, at int64, ok bool) {
	for _, op := range ops {
		if op.Acked() && (!ok || op.Complete < at) {
			target, at, ok = createdURL(op), op.Complete, true
		}
	}
	return target, at, ok
}

// createdURL is the URL a create's answer names, or the one it sent.
func createdURL(op Op) string {
	if op.RespURL != "" {
		return op.RespURL
	}
	return op.URL
}

// CheckLostCreates: after healing, every acknowledged code that no delete
// touched (acknowledged or indeterminate) must redirect to its URL on every
// node, as seen by the Final reads.
func CheckLostCreates(ops []Op, nodes []string) []Anomaly {
	var out []Anomaly
	for code, cops := range codeIndex(ops) {
		target, _, acked := ackedTarget(cops)
		if _, deleted := deletedBy(cops); !acked || deleted {
			continue
		}
		for _, node := range nodes {
			if a, bad := finalVerdict(code, node, target, cops); bad {
				out = append(out, a)
			}
		}
	}
	return sortAnomalies(out)
}

// finalVerdict judges the last Final read of code on node.
func finalVerdict(code, node, target string, cops []Op) (Anomaly, bool) {
	var last *Op
	for i := range cops {
		if cops[i].Kind == Final && cops[i].Node == node {
			last = &cops[i]
		}
	}
	a := Anomaly{Checker: "lost-create", Code: code, Node: node}
	if last == nil {
		a.Detail = "acknowledged code was never read back after healing"
		return a, true
	}
	got, found := last.Found()
	if found && got == target {
		return a, false
	}
	a.Ops = []int{last.ID}
	a.Detail = fmt.Sprintf("acknowledged with %q, after healing answered %d %q %s", target, last.Status, got, last.Err)
	return a, true
}

// CheckSingleTarget: no code is ever seen with two different URLs, across
// create answers and reads.
func CheckSingleTarget(ops []Op) []Anomaly {
	var out []Anomaly
	for code, cops := range codeIndex(ops) {
		seen := map[string][]int{}
		for _, op := range cops {
			if op.Acked() {
				seen[createdURL(op)] = append(seen[createdURL(op)], op.ID)
			} else if u, ok := op.Found(); ok {
				seen[u] = append(seen[u], op.ID)
			}
		}
		if len(seen) > 1 {
			out = append(out, Anomaly{Checker: "two-targets", Code: code, Ops: firstIDs(seen), Detail: fmt.Sprintf("targets %v", keys(seen))})
		}
	}
	return sortAnomalies(out)
}

// CheckCustomWinners: at most one create of a custom code is answered 201.
func CheckCustomWinners(ops []Op) []Anomaly {
	winners := map[string][]int{}
	urls := map[string][]string{}
	for _, op := range ops {
		if op.Kind == Custom && op.Status == 201 {
			winners[op.Code] = append(winners[op.Code], op.ID)
			urls[op.Code] = append(urls[op.Code], op.URL)
		}
	}
	var out []Anomaly
	for code, ids := range winners {
		if len(ids) > 1 {
			out = append(out, Anomaly{Checker: "custom-winners", Code: code, Ops: ids, Detail: fmt.Sprintf("%d creates answered 201 for %v", len(ids), urls[code])})
		}
	}
	return sortAnomalies(out)
}

// CheckDedupe: acknowledged dedupe creates of one URL (all in one
// workspace) return one code, unless a delete touched one of the codes.
func CheckDedupe(ops []Op) []Anomaly {
	codes := map[string]map[string][]int{}
	for _, op := range ops {
		if op.Kind == Dedupe && op.Acked() {
			if codes[op.URL] == nil {
				codes[op.URL] = map[string][]int{}
			}
			codes[op.URL][op.Code] = append(codes[op.URL][op.Code], op.ID)
		}
	}
	idx := codeIndex(ops)
	var out []Anomaly
	for u, byCode := range codes {
		if len(byCode) < 2 || anyDeleted(idx, byCode) {
			continue
		}
		out = append(out, Anomaly{Checker: "dedupe", Ops: firstIDs(byCode), Detail: fmt.Sprintf("%s got codes %v", u, keys(byCode))})
	}
	return sortAnomalies(out)
}

func anyDeleted(idx map[string][]Op, byCode map[string][]int) bool {
	for code := range byCode {
		if _, d := deletedBy(idx[code]); d {
			return true
		}
	}
	return false
}

// CheckNoReadAfterDelete: a read invoked after an acknowledged delete
// completed must not find the code, unless its node was inside a fault
// window.
func CheckNoReadAfterDelete(ops []Op, windows []Window) []Anomaly {
	var out []Anomaly
	for code, cops := range codeIndex(ops) {
		del, ok := ackedDelete(cops)
		if !ok {
			continue
		}
		for _, op := range cops {
			if u, found := op.Found(); found && op.Invoke > del.Complete && !affected(windows, op) {
				out = append(out, Anomaly{Checker: "read-after-delete", Code: code, Node: op.Node, Ops: []int{del.ID, op.ID},
					Detail: fmt.Sprintf("delete on %s answered 204 at %s, %s invoked %s later answered %d %q",
						del.Node, ms(del.Complete), op.Kind, ms(op.Invoke-del.Complete), op.Status, u)})
			}
		}
	}
	return sortAnomalies(out)
}

// ackedDelete returns the first delete of the code answered 204.
func ackedDelete(cops []Op) (Op, bool) {
	var first Op
	found := false
	for _, op := range cops {
		if op.Kind == Delete && op.Outcome == Ok && (!found || op.Complete < first.Complete) {
			first, found = op, true
		}
	}
	return first, found
}

// CheckNo404AfterAck: a read invoked after the code's create was
// acknowledged must not answer 404, unless a delete of the code may have
// happened before it completed or its node was inside a fault window.
func CheckNo404AfterAck(ops []Op, windows []Window) []Anomaly {
	var out []Anomaly
	for code, cops := range codeIndex(ops) {
		_, ackedAt, acked := ackedTarget(cops)
		if !acked {
			continue
		}
		delAt, deleted := deletedBy(cops)
		for _, op := range cops {
			if !op.Missing() || op.Invoke <= ackedAt || (deleted && delAt <= op.Complete) || affected(windows, op) {
				continue
			}
			out = append(out, Anomaly{Checker: "404-after-ack", Code: code, Node: op.Node, Ops: []int{op.ID},
				Detail: fmt.Sprintf("%s invoked %s after the create was acknowledged answered 404", op.Kind, ms(op.Invoke-ackedAt))})
		}
	}
	return sortAnomalies(out)
}

// CheckExports: every node's GET /admin/export holds the same links.
// short_url is reduced to its path (its host comes from the request).
func CheckExports(exports map[string][]byte) []Anomaly {
	nodes := keys(exports)
	if len(nodes) < 2 {
		return nil
	}
	base, err := ExportSet(exports[nodes[0]])
	if err != nil {
		return []Anomaly{{Checker: "exports", Node: nodes[0], Detail: err.Error()}}
	}
	var out []Anomaly
	for _, n := range nodes[1:] {
		set, err := ExportSet(exports[n])
		if err != nil {
			out = append(out, Anomaly{Checker: "exports", Node: n, Detail: err.Error()})
			continue
		}
		if d := DiffSets(base, set); d != "" {
			out = append(out, Anomaly{Checker: "exports", Node: n, Detail: fmt.Sprintf("export differs from %s's: %s", nodes[0], d)})
		}
	}
	return out
}

// ExportSet parses an export into canonical JSON lines (short_url reduced
// to its path, which depends on the Host a node was asked with).
func ExportSet(body []byte) (map[string]bool, error) {
	set := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(line, &obj); err != nil {
			return nil, fmt.Errorf("export line %q: %w", line, err)
		}
		if s, ok := obj["short_url"].(string); ok {
			if u, err := url.Parse(s); err == nil {
				obj["short_url"] = u.Path
			}
		}
		canon, _ := json.Marshal(obj)
		set[string(canon)] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read export: %w", err)
	}
	return set, nil
}

// DiffSets describes how two sets differ (a few lines each way), or "".
func DiffSets(a, b map[string]bool) string {
	var onlyA, onlyB []string
	for k := range a {
		if !b[k] {
			onlyA = append(onlyA, k)
		}
	}
	for k := range b {
		if !a[k] {
			onlyB = append(onlyB, k)
		}
	}
	if len(onlyA)+len(onlyB) == 0 {
		return ""
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	return fmt.Sprintf("%d lines only in the first %v, %d only in the second %v", len(onlyA), head(onlyA, 3), len(onlyB), head(onlyB, 3))
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// firstIDs returns the first operation id of each group, in key order.
func firstIDs(m map[string][]int) []int {
	var ids []int
	for _, k := range keys(m) {
		ids = append(ids, m[k][0])
	}
	return ids
}

func sortAnomalies(a []Anomaly) []Anomaly {
	sort.Slice(a, func(i, j int) bool {
		if a[i].Code != a[j].Code {
			return a[i].Code < a[j].Code
		}
		if a[i].Node != a[j].Node {
			return a[i].Node < a[j].Node
		}
		return fmt.Sprint(a[i].Ops) < fmt.Sprint(a[j].Ops)
	})
	return a
}

// ms formats nanoseconds as milliseconds.
func ms(ns int64) string { return fmt.Sprintf("%.1fms", float64(ns)/1e6) }
