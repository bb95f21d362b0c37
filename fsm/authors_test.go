package fsm

import (
	"bytes"
	"errors"
	"testing"
)

const (
	authorA = "aaaaaaaaaaaa" // limited to its own links
	authorB = "bbbbbbbbbbbb"
	authorC = "cccccccccccc"
)

// authoredState is a cluster raised to level before its keys write: A,
// limited to its own links when own, and B, each creating a link, then
// one by the operator's token and one anonymous.
func authoredState(t *testing.T, level int, own bool) (*FSM, []any) {
	t.Helper()
	a := testAPIKey(authorA, ScopeLinksRead|ScopeLinksWrite|ScopeStatsRead, AllWorkspaces)
	a.OwnLinksOnly = own
	f := New()
	res := applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: level}.Encode(),
		KeyCreateCommand{Key: a, By: RootKeyID, Now: 100}.Encode(),
		KeyCreateCommand{Key: testAPIKey(authorB, ScopeLinksRead|ScopeLinksWrite, AllWorkspaces), By: RootKeyID, Now: 100}.Encode(),
		create(200, CreateRequest{URL: "https://example.com/a", CustomCode: "bya", KeyID: authorA}),
		create(201, CreateRequest{URL: "https://example.com/b", CustomCode: "byb", KeyID: authorB}),
		create(202, CreateRequest{URL: "https://example.com/r", CustomCode: "byroot", KeyID: RootKeyID}),
		create(203, CreateRequest{URL: "https://example.com/n", CustomCode: "byanyone"}))
	return f, res
}

// TestAuthorRecorded: from LevelTargets on a link keeps the key that made
// it; the operator's token, an anonymous create and every create below the
// level leave none.
func TestAuthorRecorded(t *testing.T) {
	for _, c := range []struct {
		level int
		want  map[string]string
	}{
		{LevelTargets, map[string]string{"bya": authorA, "byb": authorB, "byroot": "", "byanyone": ""}},
		{LevelRename, map[string]string{"bya": "", "byb": "", "byroot": "", "byanyone": ""}},
	} {
		f, _ := authoredState(t, c.level, false)
		for code, want := range c.want {
			if l, ok := f.Get(code); !ok || l.Author != want {
				t.Errorf("level %d: %s made by %q (found %v), want %q", c.level, code, l.Author, ok, want)
			}
		}
	}
}

// TestOwnLinksOnlyNeedsTheLevel: below LevelTargets no link has an author,
// so a key limited to its own links would see none: Apply refuses it.
func TestOwnLinksOnlyNeedsTheLevel(t *testing.T) {
	_, res := authoredState(t, LevelRename, true)
	if err, _ := res[2].(error); !errors.Is(err, ErrNotRaised) {
		t.Fatalf("own-links key below the level: %v, want ErrNotRaised", res[2])
	}
	admin := testAPIKey(authorC, ScopeAdmin, AllWorkspaces)
	admin.OwnLinksOnly = true
	f := New()
	res = applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelTargets}.Encode(),
		KeyCreateCommand{Key: admin, By: RootKeyID, Now: 100}.Encode())
	if err, _ := res[2].(error); !errors.Is(err, ErrKeyInvalid) {
		t.Fatalf("admin key limited to its own links: %v, want ErrKeyInvalid", res[2])
	}
}

// TestOwnLinksOnlyWrites: Apply checks a key limited to its own links
// again: another's link is not found for it, its own it edits and deletes.
func TestOwnLinksOnlyWrites(t *testing.T) {
	f, _ := authoredState(t, LevelTargets, true)
	for _, c := range []struct {
		name string
		cmd  []byte
		want error
	}{
		{"edit another's", EditCommand{Code: "byb", Now: 300, KeyID: authorA, Fields: EditURL, URL: "https://example.com/x"}.Encode(), ErrNotFound},
		{"delete the token's", DeleteCommand{Code: "byroot", Now: 300, KeyID: authorA}.Encode(), ErrNotFound},
		{"delete an anonymous one", DeleteCommand{Code: "byanyone", Now: 300, KeyID: authorA}.Encode(), ErrNotFound},
		{"edit its own", EditCommand{Code: "bya", Now: 300, KeyID: authorA, Fields: EditURL, URL: "https://example.com/x"}.Encode(), nil},
		{"another key deletes A's", DeleteCommand{Code: "bya", Now: 300, KeyID: authorB}.Encode(), nil},
	} {
		res := applyAll(t, f, c.cmd)[0]
		err, _ := res.(error)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, res, c.want)
		}
	}
	if _, ok := f.Get("byb"); !ok {
		t.Error("A's refused delete removed B's link")
	}
}

// TestAuthorList: a list with an author holds only that key's links, and
// its total counts only them; a revoked key's links keep no author.
func TestAuthorList(t *testing.T) {
	f, _ := authoredState(t, LevelTargets, true)
	applyAll(t, f, create(300, CreateRequest{URL: "https://example.com/a2", CustomCode: "bya2", KeyID: authorA}))
	page := f.ListPage(nil, Filter{AnyDomain: true, Author: authorA}, 0, 0, 10, true)
	if codes := linkCodes(page.Links); codes != "bya2 bya" || page.Total.Links != 2 {
		t.Errorf("A's list: %q, total %d; want bya2 bya, 2", codes, page.Total.Links)
	}
	if page := f.ListPage([]string{"other"}, Filter{AnyDomain: true, Author: authorA}, 0, 0, 10, true); len(page.Links) != 0 {
		t.Errorf("A's links in a workspace it has none in: %q", linkCodes(page.Links))
	}
	if page := f.ListPage(nil, Filter{AnyDomain: true, Author: authorC}, 0, 0, 10, true); len(page.Links) != 0 || page.Total.Links != 0 {
		t.Errorf("a key that made nothing: %q", linkCodes(page.Links))
	}
	applyAll(t, f, KeyRevokeCommand{ID: authorA, By: RootKeyID, Now: 400}.Encode())
	if l, _ := f.Get("bya"); l.Author != "" {
		t.Errorf("a revoked key still authors %s", l.Code)
	}
	if page := f.ListPage(nil, Filter{AnyDomain: true, Author: authorA}, 0, 0, 10, true); len(page.Links) != 0 {
		t.Errorf("a revoked key's list: %q", linkCodes(page.Links))
	}
}

func linkCodes(links []Link) string {
	var b bytes.Buffer
	for i, l := range links {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(l.Code)
	}
	return b.String()
}

// TestAuthorsSurviveSnapshots: authors and keys limited to their own links
// restore from a version 12 snapshot, which is the same bytes whatever
// numbers the authors were given (here: a revoked key's reused).
func TestAuthorsSurviveSnapshots(t *testing.T) {
	f, _ := authoredState(t, LevelTargets, true)
	applyAll(t, f,
		KeyRevokeCommand{ID: authorB, By: RootKeyID, Now: 300}.Encode(),
		KeyCreateCommand{Key: testAPIKey(authorC, ScopeLinksWrite, AllWorkspaces), By: RootKeyID, Now: 300}.Encode(),
		create(301, CreateRequest{URL: "https://example.com/c", CustomCode: "byc", KeyID: authorC}))
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV12 {
		t.Fatalf("version %d, want %d", v, snapshotV12)
	}
	g := roundTrip(t, f)
	for code, want := range map[string]string{"bya": authorA, "byb": "", "byc": authorC, "byroot": ""} {
		if l, _ := g.Get(code); l.Author != want {
			t.Errorf("restored %s made by %q, want %q", code, l.Author, want)
		}
	}
	if k, _ := g.Key(authorA); !k.OwnLinksOnly {
		t.Error("restored key A sees every link")
	}
	// The restored state numbers A and C anew: what it writes next is
	// still what f writes.
	cmd := create(500, CreateRequest{URL: "https://example.com/d", CustomCode: "byc2", KeyID: authorC})
	applyAll(t, f, cmd)
	applyAll(t, g, cmd)
	if !bytes.Equal(snapshotBytes(t, f), snapshotBytes(t, g)) {
		t.Error("after the same create, the restored state's snapshot differs")
	}
}

// TestOldSnapshotsHaveNoAuthors: a state below LevelTargets writes
// version 11 without authors, and its links restore without any.
func TestOldSnapshotsHaveNoAuthors(t *testing.T) {
	f, _ := authoredState(t, LevelRename, false)
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV11 {
		t.Fatalf("version %d, want %d", v, snapshotV11)
	}
	g := roundTrip(t, f)
	applyAll(t, g, RaiseCommand{To: LevelTargets}.Encode())
	if l, _ := g.Get("bya"); l.Author != "" {
		t.Errorf("a link made below the level has author %q", l.Author)
	}
}

// TestOwnLinksOnlyDedupe: a dedupe create by a key limited to its own
// links finds only its own link of the target, never another's (Shlink's
// findOneMatching applies the key's role); another key finds the oldest.
func TestOwnLinksOnlyDedupe(t *testing.T) {
	f, _ := authoredState(t, LevelTargets, true)
	results := applyAll(t, f,
		create(300, CreateRequest{URL: "https://example.com/b", Dedupe: true, KeyID: authorA}),
		create(301, CreateRequest{URL: "https://example.com/b", Dedupe: true, KeyID: authorA}),
		create(302, CreateRequest{URL: "https://example.com/b", Dedupe: true, KeyID: authorB}),
		create(303, CreateRequest{URL: "https://example.com/b", CustomCode: "byb", Dedupe: true, KeyID: authorA}))
	first := results[0].([]CreateResult)[0]
	if first.Err != nil || first.Existing || first.Link.Code == "byb" || first.Link.Author != authorA {
		t.Fatalf("A's first dedupe create: %+v, want a new link of its own", first)
	}
	if again := results[1].([]CreateResult)[0]; !again.Existing || again.Link.Code != first.Link.Code {
		t.Errorf("A's second dedupe create: %+v, want its own %s", again, first.Link.Code)
	}
	if b := results[2].([]CreateResult)[0]; !b.Existing || b.Link.Code != "byb" {
		t.Errorf("B's dedupe create: %+v, want the oldest, byb", b)
	}
	if custom := results[3].([]CreateResult)[0]; !errors.Is(custom.Err, ErrCodeTaken) {
		t.Errorf("A's dedupe create with B's code: %+v, want ErrCodeTaken", custom)
	}
}

// TestRestoredBackupForgetsRevokedAuthors: a backup whose links a key
// created, restored after that key was revoked, keeps the links without
// their author, and its snapshot restores on a follower.
func TestRestoredBackupForgetsRevokedAuthors(t *testing.T) {
	cur, _ := authoredState(t, LevelTargets, true)
	backup := snapshotBytes(t, cur)
	applyFrom(cur, 20, KeyRevokeCommand{ID: authorA, By: RootKeyID, Now: 400}.Encode())
	f := restored(t, mergedBackup(t, cur, backup))
	for code, want := range map[string]string{"bya": "", "byb": authorB} {
		if l, ok := f.Get(code); !ok || l.Author != want {
			t.Errorf("restored %s made by %q (found %v), want %q", code, l.Author, ok, want)
		}
	}
}

// TestReadAuthorsRefuses: a restore refuses an authors section that no
// state could have written: a key that does not exist, authors out of
// order, a link that does not exist, an author past the list.
func TestReadAuthorsRefuses(t *testing.T) {
	f, _ := authoredState(t, LevelTargets, false)
	section := func(own, authors []string, links ...uint64) []byte {
		var e encoder
		encodeStrings(&e, own)
		encodeStrings(&e, authors)
		e.uvarint(uint64(len(links) / 2))
		for _, v := range links {
			e.uvarint(v)
		}
		return e.buf
	}
	for _, c := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"as written", section(nil, []string{authorA, authorB}, 1, 0, 1, 1), true},
		{"an own-links key that does not exist", section([]string{authorC}, nil), false},
		{"an author that does not exist", section(nil, []string{authorC}, 1, 0), false},
		{"authors out of order", section(nil, []string{authorB, authorA}, 1, 0), false},
		{"a link that does not exist", section(nil, []string{authorA}, 9, 0), false},
		{"the same link twice", section(nil, []string{authorA}, 1, 0, 0, 0), false},
		{"an author past the list", section(nil, []string{authorA}, 1, 1), false},
	} {
		g := roundTrip(t, f) // authors' numbers are set anew below
		g.s.links.authors = newAuthorTable()
		for p := range g.s.links.recs.n {
			g.s.links.recs.mutable(p).author = 0
		}
		d := decoder{buf: c.data}
		if err := readAuthors(g.s, &d, snapshotV12); (err == nil && len(d.buf) == 0) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}
