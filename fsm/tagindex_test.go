package fsm

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// tagWorkload changes links' tags every way a command can: made with
// tags that differ only in letter case (a long s, a Kelvin sign), edited,
// renamed and deleted by tag, their Options cleared, links deleted and
// purged.
func tagWorkload() [][]byte {
	tags := func(t ...string) *Options { return &Options{Tags: t} }
	editTags := func(code string, now int64, t ...string) []byte {
		return EditCommand{Code: code, Now: now, KeyID: RootKeyID, Fields: EditTags, Tags: t}.Encode()
	}
	rename := func(tag, to string, now int64) []byte {
		return TagsCommand{Tag: tag, NewName: to, KeyID: RootKeyID, Now: now}.Encode()
	}
	return [][]byte{
		InitCommand{Key: testKey}.Encode(),
		RaiseCommand{To: EntryLevel}.Encode(),
		create(1000,
			CreateRequest{URL: "https://example.com/1", CustomCode: "t1", Options: tags("News", "sale")},
			CreateRequest{URL: "https://example.com/2", CustomCode: "t2", Options: tags("news")},
			CreateRequest{URL: "https://example.com/3", CustomCode: "t3", Options: tags("\u017fale")}, // long s: EqualFold "sale"
			CreateRequest{URL: "https://example.com/4", CustomCode: "t4", Options: tags("\u212a-tag", "Straße")},
			CreateRequest{URL: "https://example.com/5", CustomCode: "t5", Options: &Options{Title: "no tags"}},
			CreateRequest{URL: "https://example.com/6", CustomCode: "t6", ExpiresAt: 3000, Options: tags("sale", "SALE")}),
		editTags("t5", 1100, "k-tag"),
		editTags("t2", 1101, "NEWS", "press"),
		editTags("t1", 1102, "sale"),
		rename("SALE", "deal", 1103),  // t1, t3 and t6
		rename("k-TAG", "", 1104),     // deleted from t4 and t5
		rename("news", "press", 1105), // refused: t2 carries both
		DeleteCommand{Code: "t3", Now: 1106, KeyID: RootKeyID}.Encode(),
		EditCommand{Code: "t4", Now: 1107, KeyID: RootKeyID, Fields: EditTags}.Encode(), // its Options cleared
		PurgeCommand{ExpiredBefore: 4000}.Encode(),                                      // t6
		create(4100, CreateRequest{URL: "https://example.com/7", CustomCode: "t7", Options: tags("deal")}),
	}
}

// tagIndexByWalk is the tag index as a walk of every link's Options
// makes it: each folded tag's positions, ascending.
func tagIndexByWalk(s *state) map[string][]uint64 {
	want := map[string][]uint64{}
	for p, o := range s.opts.all(s.links.positionOf) {
		for _, t := range foldTags(o.Tags) {
			want[t] = append(want[t], p)
		}
	}
	return want
}

// tagIndexOf is the tag index as the engine holds it.
func tagIndexOf(s *state) map[string][]uint64 {
	got := map[string][]uint64{}
	s.eng.scan([]byte{tagPrefix}, nil, func(key, _ []byte) bool {
		d := decoder{buf: key[1:]}
		folded := d.string()
		p, ok := positionFrom(d.buf)
		if d.err != nil || !ok {
			panic("a damaged tag key")
		}
		got[folded] = append(got[folded], p)
		return true
	})
	return got
}

// tagIndexIDs is tagIndexOf with link ids for positions (a restore packs
// positions; ids stay).
func tagIndexIDs(s *state) map[string][]uint64 {
	ids := tagIndexOf(s)
	for _, ps := range ids {
		for i, p := range ps {
			ps[i] = s.links.recs.at(p).id
		}
	}
	return ids
}

func sameTagIndex(a, b map[string][]uint64) bool {
	return maps.EqualFunc(a, b, func(x, y []uint64) bool { return slices.Equal(x, y) })
}

// TestTagIndex: after every command of a workload that changes links'
// tags every way it can, the index holds what a walk of every link's
// Options finds, a tag's rename reaches the links whose tag differs in
// letter case only as strings.EqualFold says, and a restore and a resume
// hold the same index.
func TestTagIndex(t *testing.T) {
	dir := t.TempDir()
	f := openIn(t, dir)
	for i, cmd := range tagWorkload() {
		applyAll(t, f, cmd)
		if got, want := tagIndexOf(f.s), tagIndexByWalk(f.s); !sameTagIndex(got, want) {
			t.Fatalf("after command %d the index holds %v, the links %v", i, got, want)
		}
	}
	for code, want := range map[string][]string{"t1": {"deal"}, "t2": {"NEWS", "press"}, "t5": nil, "t7": {"deal"}} {
		l, ok := f.Get(code)
		var got []string
		if l.Options != nil {
			got = l.Options.Tags
		}
		if !ok || !slices.Equal(got, want) {
			t.Errorf("%s: tags %v, want %v", code, got, want)
		}
	}
	want := tagIndexIDs(f.s)
	if got := tagIndexIDs(restoredOnDisk(t, f).s); !sameTagIndex(got, want) {
		t.Errorf("a restore indexes %v, the state %v", got, want)
	}
	if got := tagIndexIDs(keepAndResume(t, f, dir).s); !sameTagIndex(got, want) {
		t.Errorf("a resumed state indexes %v, the state kept %v", got, want)
	}
}

func TestFoldTag(t *testing.T) {
	for _, c := range []struct {
		a, b string
	}{
		{"sale", "SALE"}, {"sale", "\u017fale"}, {"k-tag", "\u212a-TAG"}, {"Straße", "STRAßE"},
		{"straße", "strasse"}, {"news", "new"}, {"ǅ", "ǆ"}, {"Σ", "ς"},
	} {
		if got, want := foldTag(c.a) == foldTag(c.b), strings.EqualFold(c.a, c.b); got != want {
			t.Errorf("%q and %q: folds equal %v, EqualFold %v", c.a, c.b, got, want)
		}
	}
}

// BenchmarkTagRename reports a tag rename's apply at 200k links with
// Options and two tags each: of a tag 4,000 links carry (renamed back and
// forth), and of one no link carries (refused).
func BenchmarkTagRename(b *testing.B) {
	f := onDisk(b)
	defer f.Close()
	loadLinks(b, f, 200_000, crawled)
	names := [2]string{"campaign-7", "campaign-seven"}
	renamed := 0 // across the runs b.Run makes
	b.Run("4000-links", func(b *testing.B) {
		for range b.N {
			res := applyAll(b, f, TagsCommand{Tag: names[renamed%2], NewName: names[(renamed+1)%2], KeyID: RootKeyID, Now: 1}.Encode())
			renamed++
			if r, ok := res[0].(TagsResult); !ok || r.Links != 4000 {
				b.Fatalf("the rename answered %v", res[0])
			}
		}
	})
	b.Run("no-link", func(b *testing.B) {
		for range b.N {
			if res := applyAll(b, f, TagsCommand{Tag: "nobody", NewName: "x", KeyID: RootKeyID, Now: 1}.Encode()); res[0] != ErrTagNotFound {
				b.Fatalf("the rename answered %v", res[0])
			}
		}
	})
}
