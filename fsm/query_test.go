package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// listCase is one list a test asks for: workspaces and filter.
type listCase struct {
	name       string
	workspaces []string
	filter     Filter
}

var listCases = []listCase{
	{"every link", nil, Filter{AnyDomain: true}},
	{"one workspace", []string{"a"}, Filter{AnyDomain: true}},
	{"two workspaces", []string{"a", "b"}, Filter{AnyDomain: true}},
	{"a workspace named twice", []string{"b", "b"}, Filter{AnyDomain: true}},
	{"unknown workspace", []string{"zzz"}, Filter{AnyDomain: true}},
	{"no workspace", []string{}, Filter{AnyDomain: true}},
	{"default domain", nil, Filter{}},
	{"other domain", []string{"a", "c"}, Filter{Domain: "go.example"}},
	{"key limited to a domain", nil, Filter{AnyDomain: true, Domains: []string{"go.example"}}},
	{"key limited to both domains", nil, Filter{AnyDomain: true, Domains: []string{"", "go.example", "go.example"}}},
	{"domain outside the key's", nil, Filter{Domain: "go.example", Domains: []string{""}}},
	{"tag in any case", nil, Filter{Tag: "GO", AnyDomain: true}},
	{"tag in a domain", []string{"b"}, Filter{Tag: "web", Domain: "go.example"}},
	{"renamed tag", nil, Filter{Tag: "net", AnyDomain: true}},
	{"text", nil, Filter{Text: "example.com/1", AnyDomain: true}},
	{"text and tag", []string{"a", "c"}, Filter{Text: "EXAMPLE", Tag: "go", AnyDomain: true}},
}

// walked is what a list holds, found by reading every link: newest first.
func walked(f *FSM, c listCase) (links []Link, total ListTotal) {
	all := f.Links()
	slices.Reverse(all)
	for _, l := range all {
		if (c.workspaces == nil || slices.Contains(c.workspaces, l.Workspace)) && c.filter.keeps(&l) {
			links = append(links, l)
			total.Links++
			total.Clicks += l.Clicks
		}
	}
	return links, total
}

// walkedTags counts the tags of links, found by reading each one.
func walkedTags(links []Link) []TagCount {
	counts := map[string]*TagCount{}
	for _, l := range links {
		if l.Options == nil {
			continue
		}
		var seen []string
		for _, tag := range l.Options.Tags {
			tag = strings.ToLower(tag)
			if slices.Contains(seen, tag) {
				continue
			}
			seen = append(seen, tag)
			if counts[tag] == nil {
				counts[tag] = &TagCount{Tag: tag}
			}
			counts[tag].Links++
			counts[tag].Clicks += l.Clicks
		}
	}
	out := []TagCount{}
	for _, c := range counts {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b TagCount) int { return strings.Compare(a.Tag, b.Tag) })
	return out
}

func codesOf(links []Link) []string {
	out := make([]string, len(links))
	for i := range links {
		out[i] = links[i].Qualified()
	}
	return out
}

// checkLists compares every list case's total and offset pages with a
// walk of every link.
func checkLists(t *testing.T, step string, f *FSM) {
	t.Helper()
	for _, c := range listCases {
		want, total := walked(f, c)
		for _, limit := range []int{1, 3, 100} {
			for offset := 0; offset <= len(want)+1; offset += max(1, limit-1) {
				page := f.ListPage(c.workspaces, c.filter, 0, offset, limit, true)
				if page.Total != total {
					t.Errorf("%s, %s: total %+v, want %+v", step, c.name, page.Total, total)
				}
				end := min(offset+limit, len(want))
				wantPage := want[min(offset, len(want)):end]
				if got := codesOf(page.Links); fmt.Sprint(got) != fmt.Sprint(codesOf(wantPage)) {
					t.Errorf("%s, %s, offset %d limit %d: %v, want %v", step, c.name, offset, limit, got, codesOf(wantPage))
				}
				if hasNext := page.Next != 0; hasNext != (end < len(want)) {
					t.Errorf("%s, %s, offset %d limit %d: next %d with %d links", step, c.name, offset, limit, page.Next, len(want))
				}
			}
		}
		if first := f.ListPage(c.workspaces, c.filter, 0, 0, 2, false); first.Next != 0 {
			page := f.ListPage(c.workspaces, c.filter, first.Next, 1, 2, true)
			if page.Total != total {
				t.Errorf("%s, %s: total below a cursor %+v, want %+v", step, c.name, page.Total, total)
			}
			if got, want := codesOf(page.Links), codesOf(want[3:min(5, len(want))]); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s, %s: offset 1 below a cursor: %v, want %v", step, c.name, got, want)
			}
		}
		if page := f.ListPage(c.workspaces, c.filter, 0, 0, 1, false); page.Total != (ListTotal{}) {
			t.Errorf("%s, %s: a total not asked for: %+v", step, c.name, page.Total)
		}
		if c.filter.Tag == "" && c.filter.Text == "" {
			if got, want := f.Tags(c.workspaces, c.filter.domainSet()), walkedTags(want); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s, %s: tags %v, want %v", step, c.name, got, want)
			}
		}
		clicked, _ := f.ClickedPage(c.workspaces, c.filter, 0, 1, true)
		if clicked.Total != total {
			t.Errorf("%s, %s: total by clicks %+v, want %+v", step, c.name, clicked.Total, total)
		}
	}
}

// TestListTotalsFollowWrites: after each kind of write and across a
// restore, every list's total (links and clicks) and its pages from any
// offset are what reading every link finds. The totals come from counts
// kept as links change and the offsets from seeks, so each write that
// forgot to keep them would show here.
func TestListTotalsFollowWrites(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseVisitRows,
		DomainCommand{Domain: Domain{Name: "go.example"}, By: RootKeyID, Now: 1}.Encode())
	var creates []CreateRequest
	for i := range 30 {
		r := CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), Workspace: []string{"a", "b", "c"}[i%3],
			CustomCode: fmt.Sprintf("c%d", i)}
		if i%4 == 0 {
			r.Domain = "go.example"
		}
		switch i % 5 {
		case 0:
			r.Options = &Options{Tags: []string{"Go", "web"}}
		case 1:
			r.Options = &Options{Tags: []string{"go", "GO"}} // one tag, twice
		case 2:
			r.Options = &Options{Tags: []string{"web"}}
		}
		if i == 7 {
			r.ExpiresAt = 50
		}
		creates = append(creates, r)
	}
	code := func(i int) string { return QualifiedCode(creates[i].Domain, creates[i].CustomCode) }
	clicks := func(seq uint64, n uint64, codes ...int) []byte {
		b := ClickBatch{Node: "n1", Seq: seq, Now: 20}
		for _, i := range codes {
			b.Counts = append(b.Counts, ClickCount{Code: code(i), Count: n})
		}
		return b.Encode()
	}
	for _, step := range []struct {
		name string
		cmds [][]byte
	}{
		{"creates", [][]byte{create(10, creates[:20]...), create(11, creates[20:]...)}},
		{"clicks", [][]byte{clicks(1, 3, 0, 1, 2, 5, 8, 13), clicks(2, 1, 0, 21, 28)}},
		{"visits", [][]byte{VisitCommand{Code: code(4), Now: 21}.Encode(), VisitCommand{Code: code(5), Now: 22}.Encode()}},
		{"deletes", [][]byte{DeleteCommand{Code: code(0), Now: 30}.Encode(), DeleteCommand{Code: code(13), Now: 30}.Encode(),
			DeleteCommand{Code: code(29), Now: 30}.Encode()}},
		{"tags edited", [][]byte{
			EditCommand{Code: code(1), Now: 31, Fields: EditTags, Tags: []string{"web"}}.Encode(),
			EditCommand{Code: code(3), Now: 31, Fields: EditTags, Tags: []string{"go"}}.Encode(),
			EditCommand{Code: code(5), Now: 31, Fields: EditTags}.Encode(),
		}},
		{"tag renamed", [][]byte{TagsCommand{Tag: "WEB", NewName: "net", Workspaces: []string{"a", "b"}, KeyID: RootKeyID, Now: 32}.Encode()}},
		{"tag deleted", [][]byte{TagsCommand{Tag: "web", KeyID: RootKeyID, Now: 33}.Encode()}},
		{"visits forgotten", [][]byte{VisitsDeleteCommand{Code: code(2), Now: 34, KeyID: RootKeyID}.Encode()}},
		{"purge", [][]byte{PurgeCommand{ExpiredBefore: 60}.Encode()}},
		{"more creates", [][]byte{create(70, CreateRequest{URL: "https://example.com/new", Workspace: "d", Options: &Options{Tags: []string{"go"}}})}},
	} {
		for i, res := range applyAll(t, f, step.cmds...) {
			if err, ok := res.(error); ok && err != nil {
				t.Fatalf("%s, entry %d: %v", step.name, i, err)
			}
			if rs, ok := res.([]CreateResult); ok && slices.ContainsFunc(rs, func(r CreateResult) bool { return r.Err != nil }) {
				t.Fatalf("%s: create refused: %+v", step.name, rs)
			}
		}
		checkLists(t, step.name, f)
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	checkLists(t, "restored", restored)
	if a, b := f.ListPage(nil, Filter{AnyDomain: true}, 0, 0, 1, true).Total, restored.ListPage(nil, Filter{AnyDomain: true}, 0, 0, 1, true).Total; a != b || a.Links != f.Len() {
		t.Errorf("total %+v before the restore, %+v after, %d links", a, b, f.Len())
	}
}

// TestListOffsetWithCursor: an offset counts from the cursor, not from the
// newest link.
func TestListOffsetWithCursor(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	var ids []uint64
	for i := range 12 {
		l := createOne(t, f, int64(i+1), CreateRequest{URL: fmt.Sprintf("https://e.example/%d", i), Workspace: []string{"a", "b"}[i%2]}).Link
		ids = append(ids, l.ID)
	}
	for _, tc := range []struct {
		name           string
		before         uint64
		offset, limit  int
		wantFirst      uint64
		wantLen        int
		wantNextNonNil bool
	}{
		{"from the newest", 0, 2, 3, ids[9], 3, true},
		{"below a cursor", ids[8], 2, 3, ids[5], 3, true},
		{"to the end", ids[8], 5, 10, ids[2], 3, false},
		{"past the end", ids[8], 8, 10, 0, 0, false},
	} {
		page := f.ListPage(nil, Filter{AnyDomain: true}, tc.before, tc.offset, tc.limit, false)
		if len(page.Links) != tc.wantLen || tc.wantLen > 0 && page.Links[0].ID != tc.wantFirst || (page.Next != 0) != tc.wantNextNonNil {
			t.Errorf("%s: %d links from %v, next %d", tc.name, len(page.Links), codesOf(page.Links), page.Next)
		}
	}
}
