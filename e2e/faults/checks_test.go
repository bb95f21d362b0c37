package faults

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hand-written histories for each checker: each case must pass (no anomaly)
// or must fail (at least one anomaly).

const u1, u2, u3, u4 = "https://example.com/1", "https://example.com/2", "https://example.com/3", "https://example.com/4"

// op builds an operation with times in milliseconds.
func op(id int, kind Kind, node, code string, invokeMs, completeMs int64, outcome Outcome, status int, respURL string) Op {
	return Op{ID: id, Client: id % 4, Kind: kind, Node: node, Code: code, Invoke: invokeMs * 1e6, Complete: completeMs * 1e6,
		Outcome: outcome, Status: status, RespURL: respURL, URL: respURL}
}

func created(id int, code, url string, from, to int64) Op {
	return op(id, Create, "n1", code, from, to, Ok, 201, url)
}

func final(id int, node, code string, status int, url string) Op {
	return op(id, Final, node, code, 1000, 1001, Ok, status, url)
}

func get(id int, node, code string, from, to int64, status int, url string) Op {
	return op(id, Redirect, node, code, from, to, Ok, status, url)
}

func del(id int, node, code string, from, to int64, outcome Outcome, status int) Op {
	return op(id, Delete, node, code, from, to, outcome, status, "")
}

// edit changes code's target to url; a 200 answers url, anything else
// answers no URL.
func edit(id int, node, code string, from, to int64, outcome Outcome, status int, url string) Op {
	o := op(id, Edit, node, code, from, to, outcome, status, url)
	if status != 200 {
		o.RespURL = ""
	}
	return o
}

// answered sets the original_url an edit's 200 named.
func answered(o Op, url string) Op {
	o.RespURL = url
	return o
}

func apiRead(id int, node, code string, from, to int64, status int, url string) Op {
	return op(id, Read, node, code, from, to, Ok, status, url)
}

type checkCase struct {
	name    string
	ops     []Op
	windows []Window
	bad     bool
}

func runCases(t *testing.T, cases []checkCase, check func([]Op, []Window) []Anomaly) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := check(c.ops, c.windows)
			if c.bad && len(got) == 0 {
				t.Errorf("want an anomaly, got none")
			}
			if !c.bad && len(got) > 0 {
				t.Errorf("want no anomaly, got %v", got)
			}
		})
	}
}

func TestCheckLostCreates(t *testing.T) {
	nodes := []string{"n1", "n2"}
	runCases(t, []checkCase{
		{name: "every node redirects", ops: []Op{created(0, "a", u1, 0, 5), final(1, "n1", "a", 302, u1), final(2, "n2", "a", 302, u1)}},
		{name: "lost on one node", bad: true, ops: []Op{created(0, "a", u1, 0, 5), final(1, "n1", "a", 302, u1), final(2, "n2", "a", 404, "")}},
		{name: "wrong target", bad: true, ops: []Op{created(0, "a", u1, 0, 5), final(1, "n1", "a", 302, u2), final(2, "n2", "a", 302, u1)}},
		{name: "never read back", bad: true, ops: []Op{created(0, "a", u1, 0, 5), final(1, "n1", "a", 302, u1)}},
		{name: "deleted by an indeterminate delete", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n1", "a", 6, 9, Info, 0), final(2, "n1", "a", 404, ""), final(3, "n2", "a", 404, "")}},
		{name: "indeterminate create may be lost", ops: []Op{op(0, Custom, "n1", "c", 0, 5, Info, 503, u1), final(1, "n1", "c", 404, ""), final(2, "n2", "c", 404, "")}},
		{name: "every node shows the acked edit", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 6, 9, Ok, 200, u2), final(2, "n1", "a", 302, u2), final(3, "n2", "a", 302, u2)}},
		{name: "created target after an acked edit", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 6, 9, Ok, 200, u2), final(2, "n1", "a", 302, u2), final(3, "n2", "a", 302, u1)}},
		{name: "indeterminate edit may or may not have applied", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 6, 9, Info, 0, u2), final(2, "n1", "a", 302, u2), final(3, "n2", "a", 302, u2)}},
		{name: "indeterminate edit lost", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 6, 9, Info, 503, u2), final(2, "n1", "a", 302, u1), final(3, "n2", "a", 302, u1)}},
		{name: "superseded edit's target", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 6, 9, Ok, 200, u2), edit(2, "n1", "a", 10, 12, Ok, 200, u3), final(3, "n1", "a", 302, u3), final(4, "n2", "a", 302, u2)}},
		{name: "concurrent acked edits, either wins", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 6, 12, Ok, 200, u2), edit(2, "n1", "a", 7, 10, Ok, 200, u3), final(3, "n1", "a", 302, u2), final(4, "n2", "a", 302, u2)}},
		{name: "refused edit's target", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 6, 9, Fail, 400, u2), final(2, "n1", "a", 302, u2), final(3, "n2", "a", 302, u2)}},
	}, func(ops []Op, _ []Window) []Anomaly { return CheckLostCreates(ops, nodes) })
}

func TestCheckSingleTarget(t *testing.T) {
	runCases(t, []checkCase{
		{name: "one target", ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 302, u1)}},
		{name: "read sees another target", bad: true, ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 302, u2)}},
		{name: "two creates answer one code", bad: true, ops: []Op{created(0, "a", u1, 0, 5), created(1, "a", u2, 0, 5)}},
		{name: "reads see the created and an acked edit's target", ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 302, u1), edit(2, "n1", "a", 8, 9, Ok, 200, u2), get(3, "n2", "a", 10, 11, 302, u2)}},
		{name: "read sees an indeterminate edit's target", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Info, 0, u2), get(2, "n2", "a", 10, 11, 302, u2), apiRead(3, "n3", "a", 12, 13, 200, u1)}},
		{name: "read sees a refused edit's target", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Fail, 404, u2), get(2, "n2", "a", 10, 11, 302, u2)}},
		{name: "read sees a target of a 404 edit that raced a delete", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n2", "a", 7, 9, Ok, 204), edit(2, "n1", "a", 8, 10, Fail, 404, u2), get(3, "n2", "a", 8, 9, 302, u2)}},
		{name: "read sees a target no edit set", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Ok, 200, u2), get(2, "n2", "a", 10, 11, 302, u2), get(3, "n2", "a", 12, 13, 302, u3)}},
		{name: "an edit's target seen on another code", bad: true, ops: []Op{created(0, "a", u1, 0, 5), created(1, "b", u3, 0, 5), edit(2, "n1", "a", 8, 9, Ok, 200, u2), get(3, "n2", "b", 10, 11, 302, u2)}},
	}, func(ops []Op, _ []Window) []Anomaly { return CheckSingleTarget(ops) })
}

func TestCheckCustomWinners(t *testing.T) {
	custom := func(id int, url string, status int) Op {
		o := op(id, Custom, "n1", "vanity", 0, 5, Ok, status, url)
		if status == 409 {
			o.Outcome, o.RespURL = Fail, ""
		}
		return o
	}
	runCases(t, []checkCase{
		{name: "one winner", ops: []Op{custom(0, u1, 201), custom(1, u2, 409), custom(2, u2, 409)}},
		{name: "no winner", ops: []Op{custom(0, u1, 409), custom(1, u2, 409)}},
		{name: "two winners", bad: true, ops: []Op{custom(0, u1, 201), custom(1, u2, 201), custom(2, u2, 409)}},
	}, func(ops []Op, _ []Window) []Anomaly { return CheckCustomWinners(ops) })
}

func TestCheckDedupe(t *testing.T) {
	dd := func(id int, code string, status int) Op {
		o := op(id, Dedupe, "n1", code, 0, 5, Ok, status, u1)
		o.Existing = status == 200
		return o
	}
	runCases(t, []checkCase{
		{name: "one code", ops: []Op{dd(0, "a", 201), dd(1, "a", 200), dd(2, "a", 200)}},
		{name: "two codes", bad: true, ops: []Op{dd(0, "a", 201), dd(1, "b", 201)}},
		{name: "two codes after a delete", ops: []Op{dd(0, "a", 201), del(1, "n1", "a", 6, 7, Ok, 204), dd(2, "b", 201)}},
	}, func(ops []Op, _ []Window) []Anomaly { return CheckDedupe(ops) })
}

func TestCheckNoReadAfterDelete(t *testing.T) {
	runCases(t, []checkCase{
		{name: "404 after delete", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n2", "a", 10, 20, Ok, 204), get(2, "n2", "a", 21, 22, 404, "")}},
		{name: "302 concurrent with delete", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n2", "a", 10, 20, Ok, 204), get(2, "n2", "a", 15, 22, 302, u1)}},
		{name: "302 after delete", bad: true, ops: []Op{created(0, "a", u1, 0, 5), del(1, "n2", "a", 10, 20, Ok, 204), get(2, "n2", "a", 21, 22, 302, u1)}},
		{name: "302 after delete inside a partition", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n2", "a", 10, 20, Ok, 204), get(2, "n3", "a", 21, 22, 302, u1)},
			windows: []Window{{Kind: "partition", Start: 18e6, End: 30e6, Nodes: []string{"n3"}}}},
		{name: "302 after an indeterminate delete", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n2", "a", 10, 20, Info, 503), get(2, "n2", "a", 21, 22, 302, u1)}},
	}, CheckNoReadAfterDelete)
}

func TestCheckNoOlderTargetAfterEdit(t *testing.T) {
	base := func(more ...Op) []Op {
		return append([]Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 10, 20, Ok, 200, u2)}, more...)
	}
	runCases(t, []checkCase{
		{name: "new target after the edit", ops: base(get(2, "n2", "a", 21, 22, 302, u2), apiRead(3, "n3", "a", 21, 22, 200, u2), final(4, "n2", "a", 302, u2))},
		{name: "old target concurrent with the edit", ops: base(get(2, "n2", "a", 15, 22, 302, u1), get(3, "n2", "a", 19, 21, 302, u1))},
		{name: "old target after the edit", bad: true, ops: base(get(2, "n2", "a", 21, 22, 302, u1))},
		{name: "old target by an API read after the edit", bad: true, ops: base(apiRead(2, "n3", "a", 30, 31, 200, u1))},
		{name: "old target by a final read", bad: true, ops: base(final(2, "n3", "a", 302, u1))},
		{name: "old target inside a partition of its node", ops: base(get(2, "n3", "a", 21, 22, 302, u1)),
			windows: []Window{{Kind: "partition", Start: 8e6, End: 30e6, Nodes: []string{"n3"}}}},
		{name: "old target inside a window of another node", bad: true, ops: base(get(2, "n2", "a", 21, 22, 302, u1)),
			windows: []Window{{Kind: "partition", Start: 8e6, End: 30e6, Nodes: []string{"n3"}}}},
		{name: "old target after the window ended", bad: true, ops: base(get(2, "n3", "a", 31, 32, 302, u1)),
			windows: []Window{{Kind: "partition", Start: 8e6, End: 30e6, Nodes: []string{"n3"}}}},
		{name: "an indeterminate later edit's target", ops: base(edit(2, "n2", "a", 25, 30, Info, 0, u3), get(3, "n3", "a", 40, 41, 302, u3), get(4, "n3", "a", 42, 43, 302, u2))},
		{name: "an indeterminate earlier edit's target (it may apply late)", ops: base(edit(2, "n2", "a", 6, 8, Info, 503, u3), get(3, "n3", "a", 40, 41, 302, u3))},
		{name: "a later edit's target read before that edit was sent", bad: true, ops: base(get(2, "n3", "a", 21, 22, 302, u3), edit(3, "n2", "a", 25, 30, Info, 0, u3))},
		{name: "a later acked edit's target", ops: base(edit(2, "n2", "a", 25, 30, Ok, 200, u3), get(3, "n3", "a", 26, 27, 302, u3), get(4, "n3", "a", 31, 32, 302, u3))},
		{name: "the earlier edit's target after a later acked one", bad: true, ops: base(edit(2, "n2", "a", 25, 30, Ok, 200, u3), get(3, "n3", "a", 31, 32, 302, u2))},
		{name: "concurrent acked edits, either target", ops: base(edit(2, "n2", "a", 15, 25, Ok, 200, u3), get(3, "n3", "a", 31, 32, 302, u2), get(4, "n1", "a", 31, 32, 302, u3))},
		{name: "a target superseded by an edit nested in a concurrent one", bad: true, ops: []Op{created(0, "a", u1, 0, 5),
			edit(1, "n1", "a", 10, 50, Ok, 200, u2), edit(2, "n2", "a", 11, 14, Ok, 200, u3), edit(3, "n3", "a", 20, 30, Ok, 200, u4), get(4, "n2", "a", 60, 61, 302, u3)}},
		{name: "a refused edit's target", bad: true, ops: base(edit(2, "n2", "a", 25, 30, Fail, 400, u3), get(3, "n3", "a", 31, 32, 302, u3))},
		{name: "404 after an acked delete", ops: base(del(2, "n2", "a", 25, 30, Ok, 204), get(3, "n3", "a", 31, 32, 404, ""))},
		{name: "404 with an indeterminate delete", ops: base(del(2, "n2", "a", 25, 30, Info, 0), get(3, "n3", "a", 26, 27, 404, ""))},
		{name: "404 without a delete", bad: true, ops: base(get(2, "n3", "a", 21, 22, 404, ""))},
		{name: "404 before a delete was sent", bad: true, ops: base(get(2, "n3", "a", 21, 22, 404, ""), del(3, "n2", "a", 25, 30, Ok, 204))},
		{name: "an edit's answer names a concurrent edit's target", ops: []Op{created(0, "a", u1, 0, 5),
			answered(edit(1, "n1", "a", 10, 20, Ok, 200, u2), u3), edit(2, "n2", "a", 12, 22, Ok, 200, u3), get(3, "n3", "a", 23, 24, 302, u3)}},
		{name: "an edit's answer names the old target", bad: true, ops: []Op{created(0, "a", u1, 0, 5), answered(edit(1, "n1", "a", 10, 20, Ok, 200, u2), u1)}},
		{name: "an edit's answer names a target sent after it answered", bad: true, ops: []Op{created(0, "a", u1, 0, 5),
			answered(edit(1, "n1", "a", 10, 20, Ok, 200, u2), u3), edit(2, "n2", "a", 21, 22, Ok, 200, u3)}},
		{name: "no acked edit, no rule", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 10, 20, Info, 0, u2), get(2, "n3", "a", 21, 22, 302, u1)}},
	}, CheckNoOlderTargetAfterEdit)
}

func TestCheckEditHistories(t *testing.T) {
	ops := []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 10, 20, Ok, 200, u2), edit(2, "n2", "a", 25, 30, Info, 0, u3), edit(3, "n2", "a", 35, 40, Ok, 200, u4)}
	vs := func(urls ...string) []Version {
		out := make([]Version, len(urls))
		for i, u := range urls {
			out[i] = Version{OriginalURL: u, ChangedAt: fmt.Sprintf("2026-11-23T09:00:0%dZ", i)}
		}
		return out
	}
	view := func(location string, urls ...string) EditedView {
		return EditedView{Status: 200, Versions: vs(urls...), Redirect: 302, Location: location}
	}
	cases := []struct {
		name  string
		views map[string]map[string]EditedView
		bad   bool
	}{
		{name: "identical, indeterminate edit applied", views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u1, u2, u3, u4)}, "n2": {"a": view(u4, u1, u2, u3, u4)}}},
		{name: "identical, indeterminate edit lost", views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u1, u2, u4)}, "n2": {"a": view(u4, u1, u2, u4)}}},
		{name: "one node lacks a version", bad: true, views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u1, u2, u3, u4)}, "n2": {"a": view(u4, u1, u2, u4)}}},
		{name: "versions differ in time", bad: true, views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u1, u2, u4)}, "n2": {"a": {Status: 200, Redirect: 302, Location: u4,
				Versions: []Version{vs(u1)[0], vs(u1, u2)[1], {OriginalURL: u4, ChangedAt: "2026-11-23T09:00:09Z"}}}}}},
		{name: "redirect is not the last version", bad: true, views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u1, u2, u4)}, "n2": {"a": view(u2, u1, u2, u4)}}},
		{name: "history refused on one node", bad: true, views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u1, u2, u4)}, "n2": {"a": {Status: 404, Redirect: 404}}}},
		{name: "acked edit missing everywhere", bad: true, views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u1, u4)}, "n2": {"a": view(u4, u1, u4)}}},
		{name: "acked edits out of order everywhere", bad: true, views: map[string]map[string]EditedView{
			"n1": {"a": view(u2, u1, u4, u2)}, "n2": {"a": view(u2, u1, u4, u2)}}},
		{name: "first version is not the created target", bad: true, views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u3, u2, u4)}, "n2": {"a": view(u4, u3, u2, u4)}}},
		{name: "a version no edit set", bad: true, views: map[string]map[string]EditedView{
			"n1": {"a": view(u4, u1, u2, "https://example.com/x", u4)}, "n2": {"a": view(u4, u1, u2, "https://example.com/x", u4)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CheckEditHistories(ops, c.views)
			if c.bad != (len(got) > 0) {
				t.Errorf("bad = %v, anomalies %v", c.bad, got)
			}
		})
	}
}

func TestParseVersions(t *testing.T) {
	v, err := ParseVersions([]byte(`{"short_code":"a","versions":[{"original_url":"` + u1 + `","changed_at":"2026-11-23T09:00:00Z"},{"original_url":"` + u2 + `","changed_at":"2026-11-23T09:00:01Z","key_id":"k1"}]}`))
	if err != nil || len(v) != 2 || v[1] != (Version{OriginalURL: u2, ChangedAt: "2026-11-23T09:00:01Z", KeyID: "k1"}) {
		t.Fatalf("ParseVersions: %v %+v", err, v)
	}
	if _, err := ParseVersions([]byte("oops")); err == nil {
		t.Fatal("ParseVersions accepted a body that is not JSON")
	}
}

func TestCheckNo404AfterAck(t *testing.T) {
	runCases(t, []checkCase{
		{name: "302 after ack", ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 302, u1)}},
		{name: "404 concurrent with create", ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 3, 7, 404, "")}},
		{name: "404 after ack", bad: true, ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 404, "")}},
		{name: "404 after ack inside a pause", ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 404, "")},
			windows: []Window{{Kind: "pause", Start: 1e6, End: 6e6}}},
		{name: "404 after a concurrent delete", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n1", "a", 6, 9, Info, 0), get(2, "n2", "a", 7, 8, 404, "")}},
	}, CheckNo404AfterAck)
}

func TestCheckExports(t *testing.T) {
	line := func(code, host string) string {
		return `{"short_code":"` + code + `","short_url":"http://` + host + `/` + code + `","original_url":"` + u1 + `"}` + "\n"
	}
	cases := []struct {
		name    string
		exports map[string][]byte
		bad     bool
	}{
		{name: "same links, other hosts", exports: map[string][]byte{"n1": []byte(line("a", "h1") + line("b", "h1")), "n2": []byte(line("b", "h2") + line("a", "h2"))}},
		{name: "one link missing", bad: true, exports: map[string][]byte{"n1": []byte(line("a", "h1") + line("b", "h1")), "n2": []byte(line("a", "h2"))}},
		{name: "not JSON", bad: true, exports: map[string][]byte{"n1": []byte(line("a", "h1")), "n2": []byte("oops\n")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CheckExports(c.exports)
			if c.bad != (len(got) > 0) {
				t.Errorf("bad = %v, anomalies %v", c.bad, got)
			}
		})
	}
}

func TestCheckLinearizable(t *testing.T) {
	custom := func(id int, url string, from, to int64, outcome Outcome, status int) Op {
		o := op(id, Custom, "n1", "c", from, to, outcome, status, url)
		if outcome != Ok {
			o.RespURL = ""
		}
		return o
	}
	dd := func(id int, code string, status int) Op {
		o := op(id, Dedupe, "n1", code, 0, 5, Ok, status, u1)
		o.Existing = status == 200
		return o
	}
	runCases(t, []checkCase{
		{name: "create read delete miss", ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 302, u1), del(2, "n1", "a", 8, 9, Ok, 204), get(3, "n2", "a", 10, 11, 404, "")}},
		{name: "read concurrent with delete sees either", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n1", "a", 8, 12, Ok, 204), get(2, "n2", "a", 9, 10, 302, u1), get(3, "n3", "a", 9, 10, 404, "")}},
		{name: "miss then hit then miss is not linearizable", bad: true, ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 404, ""), get(2, "n2", "a", 8, 9, 302, u1)}},
		{name: "redirect after delete", bad: true, ops: []Op{created(0, "a", u1, 0, 5), del(1, "n1", "a", 8, 9, Ok, 204), get(2, "n2", "a", 10, 11, 302, u1)}},
		{name: "stale redirect inside a partition is dropped", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n1", "a", 8, 9, Ok, 204), get(2, "n2", "a", 10, 11, 302, u1)},
			windows: []Window{{Kind: "partition", Start: 0, End: 20e6, Nodes: []string{"n2"}}}},
		{name: "custom race, one winner, later reads", ops: []Op{custom(0, u1, 0, 5, Ok, 201), custom(1, u2, 0, 6, Fail, 409), custom(2, u2, 1, 3, Info, 0), get(3, "n2", "c", 7, 8, 302, u1)}},
		{name: "indeterminate custom create may win", ops: []Op{custom(0, u1, 0, 5, Info, 503), custom(1, u2, 6, 7, Fail, 409), get(2, "n2", "c", 7, 8, 302, u1)}},
		{name: "409 before anyone created", bad: true, ops: []Op{custom(0, u2, 0, 1, Fail, 409), custom(1, u1, 2, 5, Ok, 201)}},
		{name: "read of another target", bad: true, ops: []Op{custom(0, u1, 0, 5, Ok, 201), get(1, "n2", "c", 7, 8, 302, u2)}},
		{name: "dedupe existing without a seen create", ops: []Op{dd(0, "d", 200), get(1, "n2", "d", 7, 8, 302, u1)}},
		{name: "edit then read the new target", ops: []Op{created(0, "a", u1, 0, 5), get(1, "n2", "a", 6, 7, 302, u1), edit(2, "n1", "a", 8, 9, Ok, 200, u2), get(3, "n2", "a", 10, 11, 302, u2)}},
		{name: "old target after an acked edit", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Ok, 200, u2), get(2, "n2", "a", 10, 11, 302, u1)}},
		{name: "old target after an acked edit inside a partition is dropped", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Ok, 200, u2), get(2, "n2", "a", 10, 11, 302, u1)},
			windows: []Window{{Kind: "partition", Start: 0, End: 20e6, Nodes: []string{"n2"}}}},
		{name: "reads concurrent with an edit see old or new", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 20, Ok, 200, u2), get(2, "n2", "a", 9, 10, 302, u1), get(3, "n3", "a", 11, 12, 302, u2), get(4, "n2", "a", 21, 22, 302, u2)}},
		{name: "new then old on two nodes while an edit is under way: left out", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 20, Ok, 200, u2), get(2, "n3", "a", 9, 10, 302, u2), get(3, "n2", "a", 11, 12, 302, u1)}},
		{name: "two edits in order", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Ok, 200, u2), edit(2, "n2", "a", 10, 11, Ok, 200, u3), get(3, "n3", "a", 12, 13, 302, u3)}},
		{name: "the first of two edits read after both", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Ok, 200, u2), edit(2, "n2", "a", 10, 11, Ok, 200, u3), get(3, "n3", "a", 12, 13, 302, u2)}},
		{name: "indeterminate edit seen late, then kept", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Info, 0, u2), get(2, "n2", "a", 10, 11, 302, u1), get(3, "n2", "a", 12, 13, 302, u2), get(4, "n3", "a", 14, 15, 302, u2)}},
		{name: "indeterminate edit seen, then undone", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n1", "a", 8, 9, Info, 0, u2), get(2, "n2", "a", 10, 11, 302, u2), get(3, "n2", "a", 12, 13, 302, u1)}},
		{name: "edit answered 404 after a delete", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n1", "a", 6, 7, Ok, 204), edit(2, "n2", "a", 8, 9, Fail, 404, u2), get(3, "n2", "a", 10, 11, 404, "")}},
		{name: "edit answered 404 on a live code", bad: true, ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 8, 9, Fail, 404, u2), get(2, "n2", "a", 10, 11, 302, u1)}},
		{name: "edit answered 404 applied just before a racing delete", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 8, 20, Fail, 404, u2), del(2, "n1", "a", 9, 19, Ok, 204), get(3, "n3", "a", 10, 11, 302, u2), get(4, "n3", "a", 21, 22, 404, "")}},
		{name: "edit answered 200 after an acked delete", bad: true, ops: []Op{created(0, "a", u1, 0, 5), del(1, "n1", "a", 6, 7, Ok, 204), edit(2, "n2", "a", 8, 9, Ok, 200, u2)}},
		{name: "an edit answered with a concurrent edit's target", ops: []Op{created(0, "a", u1, 0, 5), answered(edit(1, "n1", "a", 8, 20, Ok, 200, u2), u3), edit(2, "n2", "a", 9, 21, Ok, 200, u3), get(3, "n3", "a", 22, 23, 302, u3)}},
		{name: "refused edit leaves the target", ops: []Op{created(0, "a", u1, 0, 5), edit(1, "n2", "a", 8, 9, Fail, 400, u2), get(2, "n2", "a", 10, 11, 302, u1)}},
		{name: "a delete refused 401 leaves the link", ops: []Op{created(0, "a", u1, 0, 5), del(1, "n3", "a", 6, 7, Fail, 401), get(2, "n2", "a", 10, 11, 302, u1)}},
		{name: "a delete answered 404 on a live code", bad: true, ops: []Op{created(0, "a", u1, 0, 5), del(1, "n3", "a", 6, 7, Fail, 404), get(2, "n2", "a", 10, 11, 302, u1)}},
	}, func(ops []Op, windows []Window) []Anomaly {
		return CheckLinearizable(ops, windows, "", 10*time.Second).Anomalies
	})
}

func TestLinearizableWritesHTML(t *testing.T) {
	dir := t.TempDir()
	ops := []Op{created(0, "a", u1, 0, 5), del(1, "n1", "a", 8, 9, Ok, 204), get(2, "n2", "a", 10, 11, 302, u1)}
	res := CheckLinearizable(ops, nil, dir, 10*time.Second)
	if res.Illegal != 1 || len(res.HTML) != 1 {
		t.Fatalf("want one illegal code with a visualisation, got %+v", res)
	}
	data, err := os.ReadFile(filepath.Join(dir, "linearizability-a.html"))
	if err != nil || !strings.Contains(string(data), "<html") {
		t.Fatalf("visualisation: %v, %d bytes", err, len(data))
	}
}

func TestHistoryJSONLRoundTrip(t *testing.T) {
	var h History
	h.Add(created(0, "a", u1, 0, 5))
	h.Add(get(0, "n2", "a", 6, 7, 302, u1))
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, h.Ops()); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(&buf)
	if err != nil || len(back) != 2 || back[1].ID != 1 || back[1].RespURL != u1 {
		t.Fatalf("round trip: %v %+v", err, back)
	}
}
