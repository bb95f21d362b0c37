package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

var raiseRename = RaiseCommand{To: LevelRename}.Encode()

// renameWorkload is a raised state with links in the default domain and
// a registered one, clicks with visitors on the one to rename, and a
// deleted code, then the rename of "old" to "new" (the last entry).
func renameWorkload() [][]byte {
	day := int64(20_000) * dayMillis
	return [][]byte{
		InitCommand{Key: testKey}.Encode(),
		raiseRename,
		DomainCommand{Domain: Domain{Name: "go.example"}, By: RootKeyID, Now: 10}.Encode(),
		create(100,
			CreateRequest{URL: "https://example.com/a", CustomCode: "old", Dedupe: true, Options: &Options{Title: "A", Tags: []string{"t1"}}},
			CreateRequest{URL: "https://example.com/b", CustomCode: "busy"},
			CreateRequest{URL: "https://example.com/c", CustomCode: "gone"},
			CreateRequest{URL: "https://example.com/d", CustomCode: "there", Domain: "go.example"},
		),
		DeleteCommand{Code: "gone", Now: 150}.Encode(),
		visitorsAt("n1", 1, day+hour, ClickCount{Code: "old", Count: 3, Visitor: chromeDE}),
		RenameCommand{NewCode: "new", Edit: EditCommand{Code: "old", Now: day + 2*hour, KeyID: RootKeyID}}.Encode(),
	}
}

func renamed(t *testing.T) *FSM {
	t.Helper()
	f := New()
	for i, r := range applyAll(t, f, renameWorkload()...) {
		if err, ok := r.(error); ok && err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	return f
}

// TestRenameKeepsTheLink: the link answers under its new code with the
// same id, target, options, clicks and visitors, and its old code as a
// deleted link's does.
func TestRenameKeepsTheLink(t *testing.T) {
	f := renamed(t)
	l, ok := f.Get("new")
	if !ok {
		t.Fatal("no link under the new code")
	}
	if l.ID != 1 || l.URL != "https://example.com/a" || l.Clicks != 3 || l.Options == nil || l.Options.Title != "A" ||
		!reflect.DeepEqual(l.Options.Tags, []string{"t1"}) {
		t.Fatalf("renamed link: %+v %+v", l, l.Options)
	}
	if _, ok := f.Get("old"); ok {
		t.Fatal("the old code still answers")
	}
	if _, ok := f.Lookup([]byte("old")); ok {
		t.Fatal("the old code still redirects")
	}
	if v, ok := f.LinkVisits("new", 0, 1<<62, ByCountry); !ok || len(v.Groups) != 1 || v.Groups[0].Clicks != 3 {
		t.Fatalf("visits under the new code: %+v %v", v, ok)
	}
	// Dedupe still finds the link, under its new code.
	if again := createOne(t, f, 1<<40, CreateRequest{URL: "https://example.com/a", Dedupe: true}); !again.Existing || again.Link.Code != "new" {
		t.Fatalf("dedupe after the rename: %+v", again)
	}
	if got, _ := f.List(nil, 0, 10); len(got) != 3 || got[2].Code != "new" {
		t.Fatalf("the workspace lists %+v", got)
	}
}

func TestRenameRules(t *testing.T) {
	at := int64(1 << 40)
	rename := func(from, to string) []byte {
		return RenameCommand{NewCode: to, Edit: EditCommand{Code: from, Now: at, KeyID: RootKeyID}}.Encode()
	}
	tests := []struct {
		name  string
		entry []byte
		want  error
	}{
		{"to a free code", rename("busy", "free"), nil},
		{"to a live code", rename("busy", "new"), ErrCodeTaken},
		{"to its own code", rename("busy", "busy"), ErrCodeTaken},
		{"to a deleted code", rename("busy", "gone"), ErrCodeDeleted},
		{"to a code a rename retired", rename("busy", "old"), ErrCodeDeleted},
		{"to a reserved word", rename("busy", "api"), ErrReserved},
		{"to an empty code", rename("busy", ""), ErrInvalidRequest},
		{"to a code with a slash", rename("go.example/there", "go.example/a/b"), ErrInvalidRequest},
		{"into another domain", rename("busy", "go.example/busy2"), ErrInvalidRequest},
		{"out of its domain", rename("go.example/there", "there"), ErrInvalidRequest},
		{"within its domain", rename("go.example/there", "go.example/here"), nil},
		{"of a missing link", rename("nope", "free"), ErrNotFound},
		{"of a deleted link", rename("gone", "free"), ErrNotFound},
		{"with an edit it refuses", RenameCommand{NewCode: "free", Edit: EditCommand{Code: "busy", Now: at,
			Fields: EditURL, URL: "ftp://example.com/"}}.Encode(), ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := renamed(t)
			before := snapshotBytes(t, f)
			res := applyAll(t, f, tt.entry)[0]
			err, _ := res.(error)
			if !errors.Is(err, tt.want) || tt.want == nil && err != nil {
				t.Fatalf("got %v, want %v", res, tt.want)
			}
			if tt.want != nil && !bytes.Equal(before, snapshotBytes(t, f)) {
				t.Fatal("a refused rename changed the state")
			}
		})
	}
}

// TestRenameWithAnEditIsOneWrite: the other fields of the same request
// change with the code.
func TestRenameWithAnEditIsOneWrite(t *testing.T) {
	f := renamed(t)
	res := applyAll(t, f, RenameCommand{NewCode: "free", Edit: EditCommand{Code: "busy", Now: 1 << 40,
		Fields: EditTitle, Title: "renamed"}}.Encode())[0]
	l, ok := res.(Link)
	if !ok || l.Code != "free" || l.Options == nil || l.Options.Title != "renamed" {
		t.Fatalf("answer %+v", res)
	}
}

// TestRetiredCodesAreNeverIssued: a code a rename retired is refused to a
// custom create and skipped by the counter, like a deleted one.
func TestRetiredCodesAreNeverIssued(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseRename)
	first := createOne(t, f, 1, CreateRequest{URL: "https://example.com/1"})
	// The code the counter would hand out next, learnt from a twin.
	twin := New()
	applyAll(t, twin, InitCommand{Key: testKey}.Encode(), raiseRename, create(1, CreateRequest{URL: "https://example.com/1"}))
	next := createOne(t, twin, 2, CreateRequest{URL: "https://example.com/2"}).Link.Code

	// Rename the first link to the counter's next code, then away from
	// it: the counter must skip it, retired.
	for i, to := range []string{next, "elsewhere"} {
		from := first.Link.Code
		if i == 1 {
			from = next
		}
		if res := applyAll(t, f, RenameCommand{NewCode: to, Edit: EditCommand{Code: from, Now: 2}}.Encode())[0]; res.(Link).Code != to {
			t.Fatalf("rename to %s: %v", to, res)
		}
	}
	got := createOne(t, f, 3, CreateRequest{URL: "https://example.com/2"})
	if got.Link.Code == next || got.Link.Code == first.Link.Code {
		t.Fatalf("the counter issued the retired code %s", got.Link.Code)
	}
	for _, code := range []string{first.Link.Code, next} {
		if res := createOne(t, f, 4, CreateRequest{URL: "https://example.com/3", CustomCode: code}); !errors.Is(res.Err, ErrCodeDeleted) {
			t.Errorf("custom create of retired %s: %v, want ErrCodeDeleted", code, res.Err)
		}
	}
}

// TestRenameNeedsTheRaise: a cluster not yet raised to LevelRename (some
// server's build cannot apply the entry) refuses it.
func TestRenameNeedsTheRaise(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelRemovals}.Encode(),
		create(1, CreateRequest{URL: "https://example.com/", CustomCode: "old"}))
	res := applyAll(t, f, RenameCommand{NewCode: "new", Edit: EditCommand{Code: "old", Now: 2}}.Encode())[0]
	if err, _ := res.(error); !errors.Is(err, ErrNotRaised) {
		t.Fatalf("got %v, want ErrNotRaised", res)
	}
	if RequiredLevel(RenameCommand{}.Encode()) != LevelRename {
		t.Fatal("a rename's entry does not need LevelRename")
	}
}

// TestRenameSurvivesSnapshotsAndIsDeterministic: the renamed link and its
// retired code come back from a snapshot, which is the same bytes as one
// of a state that applied the same entries one by one.
func TestRenameSurvivesSnapshotsAndIsDeterministic(t *testing.T) {
	f := renamed(t)
	g := New()
	for _, c := range renameWorkload() {
		applyAll(t, g, c)
	}
	data := snapshotBytes(t, f)
	if !bytes.Equal(data, snapshotBytes(t, g)) {
		t.Fatal("the same entries applied one by one give another state")
	}
	back := New()
	if err := back.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !bytes.Equal(data, snapshotBytes(t, back)) {
		t.Fatal("the restored state's snapshot differs")
	}
	if l, ok := back.Get("new"); !ok || l.Clicks != 3 {
		t.Fatalf("renamed link after restore: %+v %v", l, ok)
	}
	if res := createOne(t, back, 1<<40, CreateRequest{URL: "https://example.com/x", CustomCode: "old"}); !errors.Is(res.Err, ErrCodeDeleted) {
		t.Fatalf("the retired code after restore: %v", res.Err)
	}
}

// TestRenameEmitsAnUpdateWithThePreviousCode: a webhook on link.updated
// hears the rename, with the new code and the old, through a snapshot.
func TestRenameEmitsAnUpdateWithThePreviousCode(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseRename,
		setHook(hookA, "https://hooks.example/", EventTypes(0).With(EventLinkUpdated)),
		create(2, CreateRequest{URL: "https://example.com/", CustomCode: "old"}),
		RenameCommand{NewCode: "new", Edit: EditCommand{Code: "old", Now: 3}}.Encode())
	for _, g := range []*FSM{f, roundTrip(t, f)} {
		_, events, _ := g.WebhookPending(hookA, 0, 10)
		if len(events) != 1 || events[0].Type != EventLinkUpdated || events[0].Link.Code != "new" || events[0].Link.PreviousCode != "old" {
			t.Fatalf("events %+v", events)
		}
	}
}
