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

// String is the anomaly as a report line: its checker, then what it saw.
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
// touched (acknowledged or indeterminate) must redirect on every node, as
// seen by the Final reads, to a target it may have at the end: its created
// URL while no edit of it was acknowledged, or the target of an edit that
// no acknowledged edit followed (an indeterminate edit's target always
// qualifies: it may have taken effect last).
func CheckLostCreates(ops []Op, nodes []string) []Anomaly {
	var out []Anomaly
	for code, cops := range codeIndex(ops) {
		target, _, acked := ackedTarget(cops)
		if _, deleted := deletedBy(cops); !acked || deleted {
			continue
		}
		targets := finalTargets(cops, target)
		for _, node := range nodes {
			if a, bad := finalVerdict(code, node, target, targets, cops); bad {
				out = append(out, a)
			}
		}
	}
	return sortAnomalies(out)
}

// finalTargets is every target the code may have once every operation
// ended: the created one unless an edit was acknowledged, and the target
// of every edit that took or may have taken effect and that no
// acknowledged edit invoked after it completed superseded.
func finalTargets(cops []Op, created string) map[string]bool {
	out := map[string]bool{}
	edits := mayEdits(cops)
	if len(ackedEdits(cops)) == 0 {
		out[created] = true
	}
	for _, x := range edits {
		if !supersededBy(x, cops) {
			out[x.EditTarget()] = true
		}
	}
	return out
}

// supersededBy reports whether an acknowledged edit of the code was
// invoked after edit x completed, so that x's target can no longer be the
// current one. An indeterminate edit has no completion: never superseded.
func supersededBy(x Op, cops []Op) bool {
	if !x.EditAcked() {
		return false
	}
	for _, e := range cops {
		if e.EditAcked() && e.ID != x.ID && e.Invoke > x.Complete {
			return true
		}
	}
	return false
}

// finalVerdict judges the last Final read of code on node.
func finalVerdict(code, node, created string, targets map[string]bool, cops []Op) (Anomaly, bool) {
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
	if found && targets[got] {
		return a, false
	}
	a.Ops = []int{last.ID}
	a.Detail = fmt.Sprintf("acknowledged with %q, after healing answered %d %q %s", created, last.Status, got, last.Err)
	if len(targets) != 1 || !targets[created] {
		a.Detail += fmt.Sprintf("; after its edits it may only be %v", keys(targets))
	}
	return a, true
}

// mayEdits returns the code's edits that took or may have taken effect:
// answered 200 or indeterminate, and those answered 404 while a delete of
// the code (acknowledged or indeterminate) had been sent: the leader
// answers 404 when the link is gone right after it applied the edit.
func mayEdits(cops []Op) []Op {
	var out []Op
	for _, op := range cops {
		if op.MayHaveEdited() || raced404(op, cops) {
			out = append(out, op)
		}
	}
	return out
}

// raced404 reports whether op is an edit answered 404 while a delete of
// the code that took or may have taken effect was under way or done.
func raced404(op Op, cops []Op) bool {
	return op.Kind == Edit && op.Status == 404 && deleteSentBefore(cops, op.Complete)
}

// deleteSentBefore reports whether a delete of the code that took or may
// have taken effect was invoked before t.
func deleteSentBefore(cops []Op, t int64) bool {
	for _, op := range cops {
		if op.Kind == Delete && op.Outcome != Fail && op.Invoke < t {
			return true
		}
	}
	return false
}

// ackedEdits returns the code's edits answered 200.
func ackedEdits(cops []Op) []Op {
	var out []Op
	for _, op := range cops {
		if op.EditAcked() {
			out = append(out, op)
		}
	}
	return out
}

// CheckSingleTarget: a code changes target only through an edit. Across
// create answers and reads, a code is seen with at most one URL besides
// the targets its edits may have set (edits answered 200, indeterminate
// ones, and those answered 404 in a race with a delete); an edit refused
// outright sets nothing, so its target must never be seen.
func CheckSingleTarget(ops []Op) []Anomaly {
	var out []Anomaly
	for code, cops := range codeIndex(ops) {
		edited := map[string]bool{}
		for _, e := range mayEdits(cops) {
			edited[e.EditTarget()] = true
		}
		seen := map[string][]int{}
		for _, op := range cops {
			var u string
			if op.Acked() {
				u = createdURL(op)
			} else if found, ok := op.Found(); ok {
				u = found
			} else {
				continue
			}
			if !edited[u] {
				seen[u] = append(seen[u], op.ID)
			}
		}
		if len(seen) > 1 {
			detail := fmt.Sprintf("targets %v", keys(seen))
			if len(edited) > 0 {
				detail += fmt.Sprintf(" besides those its edits may have set %v", keys(edited))
			}
			out = append(out, Anomaly{Checker: "two-targets", Code: code, Ops: firstIDs(seen), Detail: detail})
		}
	}
	return sortAnomalies(out)
}

// CheckNoOlderTargetAfterEdit: once an edit is answered 200, a read of the
// code (redirect, API read or final read) invoked after that answer, on a
// node outside every fault window, returns the edit's target or that of an
// edit that may have taken effect after it: one answered 200 that was not
// over before the first was sent, or an indeterminate one (it may take
// effect any time after it was sent), in both cases sent before the read
// completed. Any other target (the created one, an earlier edit's) is a
// superseded one. A 404 is allowed only when a delete of the code
// (acknowledged or indeterminate) was sent before the read completed.
//
// An edit's 200 answer is the link read back once the edit applied, so the
// original_url it names follows the same rule: the edit's own target, or
// that of an edit that may have taken effect after it and was sent before
// the answer came.
func CheckNoOlderTargetAfterEdit(ops []Op, windows []Window) []Anomaly {
	var out []Anomaly
	for code, cops := range codeIndex(ops) {
		acked := ackedEdits(cops)
		if len(acked) == 0 {
			continue
		}
		for _, e := range acked {
			if e.RespURL != "" && !targetAfter(e.RespURL, e, mayEdits(cops), e) {
				out = append(out, Anomaly{Checker: "older-target-after-edit", Code: code, Node: e.Node, Ops: []int{e.ID},
					Detail: fmt.Sprintf("edit to %q answered 200 naming %q, which no edit sent while it ran set", e.EditTarget(), e.RespURL)})
			}
		}
		// The latest answer first: the anomaly names the newest edit the
		// read should have seen.
		sort.SliceStable(acked, func(i, j int) bool { return acked[i].Complete > acked[j].Complete })
		edits := mayEdits(cops)
		for _, r := range cops {
			if !r.IsRead() || affected(windows, r) {
				continue
			}
			u, found := r.Found()
			if !found && !r.Missing() {
				continue
			}
			// Every edit answered before the read was sent binds it (a
			// target allowed after the newest may still be one an edit
			// nested inside it superseded); the first violated is named.
			for _, e := range acked {
				if e.Complete >= r.Invoke || found && targetAfter(u, e, edits, r) {
					continue
				}
				if !found && deleteSentBefore(cops, r.Complete) {
					break
				}
				got := fmt.Sprintf("answered %d %q", r.Status, u)
				if !found {
					got = "answered 404, and no delete of the code was sent before it completed"
				}
				out = append(out, Anomaly{Checker: "older-target-after-edit", Code: code, Node: r.Node, Ops: []int{e.ID, r.ID},
					Detail: fmt.Sprintf("edit on %s to %q answered 200 at %s; %s invoked %s later %s",
						e.Node, e.EditTarget(), ms(e.Complete), r.Kind, ms(r.Invoke-e.Complete), got)})
				break
			}
		}
	}
	return sortAnomalies(out)
}

// targetAfter reports whether u, which read r found, is the target of the
// acknowledged edit e or of an edit that may have taken effect after e
// and before r completed.
func targetAfter(u string, e Op, edits []Op, r Op) bool {
	if u == e.EditTarget() {
		return true
	}
	for _, x := range edits {
		if x.ID == e.ID || x.EditTarget() != u || x.Invoke >= r.Complete {
			continue
		}
		if !x.EditAcked() || x.Complete > e.Invoke {
			return true
		}
	}
	return false
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

// Version is one entry of GET /api/v1/urls/{code}/history.
type Version struct {
	OriginalURL string `json:"original_url"`
	ChangedAt   string `json:"changed_at"`
	KeyID       string `json:"key_id,omitempty"`
}

// ParseVersions reads the versions of a history answer.
func ParseVersions(body []byte) ([]Version, error) {
	var h struct {
		Versions []Version `json:"versions"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, fmt.Errorf("history answer %.200q: %w", body, err)
	}
	return h.Versions, nil
}

// EditedView is what one node answered, after the final heal, for one
// edited code: its history (GET /api/v1/urls/{code}/history) and its
// redirect (HEAD /{code}).
type EditedView struct {
	Status   int       `json:"status"` // of the history request, 0 without an answer
	Err      string    `json:"error,omitempty"`
	Versions []Version `json:"versions"`
	Redirect int       `json:"redirect"` // status of the HEAD
	Location string    `json:"location,omitempty"`
}

// CheckEditHistories judges what every node answered, after the final
// heal, for a sample of edited codes that no delete touched (views: node,
// then code). For each code: every node answers its history (200) and
// redirects (302); the versions lists are identical on every node; each
// node redirects to the last version's original_url; and the list agrees
// with the recorded operations: its first version is the created target,
// every later one the target of an edit that took or may have taken
// effect, no target twice, every edit answered 200 in it, and an edit
// answered 200 before another acknowledged one was sent comes before it.
func CheckEditHistories(ops []Op, views map[string]map[string]EditedView) []Anomaly {
	idx := codeIndex(ops)
	nodes := keys(views)
	codes := map[string]bool{}
	for _, n := range nodes {
		for code := range views[n] {
			codes[code] = true
		}
	}
	var out []Anomaly
	for _, code := range keys(codes) {
		bad := func(node, format string, args ...any) {
			out = append(out, Anomaly{Checker: "edit-history", Code: code, Node: node, Detail: fmt.Sprintf(format, args...)})
		}
		var base []Version
		baseNode := ""
		for _, n := range nodes {
			v, ok := views[n][code]
			switch {
			case !ok:
				bad(n, "history not fetched")
				continue
			case v.Status != 200:
				bad(n, "history answered %d %s", v.Status, v.Err)
				continue
			case len(v.Versions) == 0:
				bad(n, "history has no versions")
				continue
			}
			last := v.Versions[len(v.Versions)-1].OriginalURL
			if v.Redirect != 302 || v.Location != last {
				bad(n, "redirects %d %q, but its history's last version is %q", v.Redirect, v.Location, last)
			}
			if baseNode == "" {
				base, baseNode = v.Versions, n
			} else if d := diffVersions(base, v.Versions); d != "" {
				bad(n, "history differs from %s's: %s", baseNode, d)
			}
		}
		if baseNode != "" {
			for _, d := range versionsAgainstOps(base, idx[code]) {
				bad(baseNode, "%s", d)
			}
		}
	}
	return out
}

// diffVersions describes the first difference of two versions lists, or "".
func diffVersions(a, b []Version) string {
	for i := range max(len(a), len(b)) {
		switch {
		case i >= len(a):
			return fmt.Sprintf("%d versions against %d; extra %+v", len(a), len(b), b[i])
		case i >= len(b):
			return fmt.Sprintf("%d versions against %d; missing %+v", len(a), len(b), a[i])
		case a[i] != b[i]:
			return fmt.Sprintf("version %d is %+v against %+v", i, b[i], a[i])
		}
	}
	return ""
}

// versionsAgainstOps checks one code's versions list against its recorded
// operations and returns what disagrees.
func versionsAgainstOps(versions []Version, cops []Op) []string {
	var out []string
	if created, _, ok := ackedTarget(cops); ok && versions[0].OriginalURL != created {
		out = append(out, fmt.Sprintf("first version %q is not the created target %q", versions[0].OriginalURL, created))
	}
	edits := map[string]Op{}
	for _, e := range mayEdits(cops) {
		edits[e.EditTarget()] = e
	}
	pos := map[string]int{}
	for i, v := range versions {
		if _, dup := pos[v.OriginalURL]; dup {
			out = append(out, fmt.Sprintf("target %q appears twice", v.OriginalURL))
		}
		pos[v.OriginalURL] = i
		if _, ok := edits[v.OriginalURL]; i > 0 && !ok {
			out = append(out, fmt.Sprintf("version %d %q is the target of no edit that took or may have taken effect", i, v.OriginalURL))
		}
	}
	acked := ackedEdits(cops)
	for _, e := range acked {
		if _, ok := pos[e.EditTarget()]; !ok {
			out = append(out, fmt.Sprintf("edit %d to %q was answered 200 but is not in the history", e.ID, e.EditTarget()))
		}
	}
	for _, a := range acked {
		for _, b := range acked {
			pa, okA := pos[a.EditTarget()]
			pb, okB := pos[b.EditTarget()]
			if okA && okB && a.Complete < b.Invoke && pa > pb {
				out = append(out, fmt.Sprintf("edit %d to %q was answered before edit %d to %q was sent, but comes after it", a.ID, a.EditTarget(), b.ID, b.EditTarget()))
			}
		}
	}
	return out
}
