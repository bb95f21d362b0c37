package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/linkraft/linkraft/fsm/codes"
)

// optionsWorkload exercises everything links gained beyond their target:
// options on create, edits of each field, domains, visit limits.
func optionsWorkload() [][]byte {
	canon := func(u string) string { c, _ := codes.Canonicalize(u); return c }
	return [][]byte{
		InitCommand{Key: testKey}.Encode(),
		DomainCommand{Domain: Domain{Name: "go.example", RootRedirect: "https://example.com/home"}, By: RootKeyID, Now: 10}.Encode(),
		create(100,
			CreateRequest{URL: "https://example.com/a", CustomCode: "docs", Options: &Options{Title: "Docs", Tags: []string{"Go", "web"}}},
			CreateRequest{URL: "https://example.com/b", CustomCode: "docs", Domain: "go.example", Options: &Options{MaxVisits: 2}},
			CreateRequest{URL: "https://example.com/c", Dedupe: true, Options: &Options{PasswordHash: "$2a$10$abc", Rules: []Rule{
				{Device: DeviceIOS, URL: "https://apps.example/ios"},
				{Language: "de", Query: []QueryParam{{"ref", "x"}}, After: 5, Before: 500, URL: "https://example.de/"},
			}}},
		),
		EditCommand{Code: "docs", Now: 200, KeyID: RootKeyID, Fields: EditURL | EditTitle, URL: "https://example.com/a2", Title: "Docs 2"}.Encode(),
		EditCommand{Code: "docs", Now: 300, Fields: EditURL | EditTags | EditForwardQuery, URL: "https://example.com/a3", ForwardQuery: true}.Encode(),
		EditCommand{Code: "go.example/docs", Now: 310, Fields: EditExpiresAt | EditValidSince | EditPublicStats, ExpiresAt: 9000, ValidSince: 50, PublicStats: true}.Encode(),
		EditCommand{Code: "docs", Now: 320, Fields: EditURL, URL: "https://example.com/c", Canonical: canon("https://example.com/c")}.Encode(),
		VisitCommand{Code: "go.example/docs", Now: 400}.Encode(),
		VisitCommand{Code: "go.example/docs", Now: 401}.Encode(),
		VisitCommand{Code: "go.example/docs", Now: 402}.Encode(),
	}
}

func TestEditKeepsHistoryAndOptions(t *testing.T) {
	f := New()
	results := applyAll(t, f, optionsWorkload()...)
	for i, r := range results[3:9] {
		if err, ok := r.(error); ok && err != nil {
			t.Fatalf("entry %d: %v", i+3, err)
		}
	}
	if err, _ := results[9].(error); !errors.Is(err, ErrVisitLimit) {
		t.Fatalf("third visit to a link limited to two: %v, want ErrVisitLimit", results[9])
	}
	l, ok := f.Get("docs")
	if !ok || l.URL != "https://example.com/c" {
		t.Fatalf("edited link: %+v", l)
	}
	o := l.Options
	if o.Title != "Docs 2" || len(o.Tags) != 0 || !o.ForwardQuery {
		t.Fatalf("options after edits: %+v", o)
	}
	want := []Version{{URL: "https://example.com/a", ChangedAt: 100}, {URL: "https://example.com/a2", ChangedAt: 200, KeyID: RootKeyID}, {URL: "https://example.com/a3", ChangedAt: 300}, {URL: "https://example.com/c", ChangedAt: 320}}
	if !reflect.DeepEqual(o.History, want) {
		t.Fatalf("history %+v\nwant    %+v", o.History, want)
	}
	// The last edit changed docs into a link to example.com/c, but docs is
	// not a dedupe link, so dedupe still returns the original dedupe link.
	other, _ := f.Get("go.example/docs")
	if other.Domain != "go.example" || other.Code != "docs" || other.Clicks != 2 || other.ExpiresAt != 9000 ||
		other.Options.ValidSince != 50 || !other.Options.PublicStats || other.Options.MaxVisits != 2 {
		t.Fatalf("link in the other domain: %+v %+v", other, other.Options)
	}
}

func TestEditOfADedupeLinkMovesItsDedupeEntry(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	first := createOne(t, f, 1, CreateRequest{URL: "https://example.com/old", Dedupe: true})
	canon, _ := codes.Canonicalize("https://example.com/new")
	if err, _ := applyAll(t, f, EditCommand{Code: first.Link.Code, Now: 2, Fields: EditURL, URL: "https://example.com/new", Canonical: canon}.Encode())[0].(error); err != nil {
		t.Fatal(err)
	}
	if again := createOne(t, f, 3, CreateRequest{URL: "https://example.com/new", Dedupe: true}); !again.Existing || again.Link.Code != first.Link.Code {
		t.Fatalf("dedupe of the new target: %+v, want the edited link", again)
	}
	if old := createOne(t, f, 4, CreateRequest{URL: "https://example.com/old", Dedupe: true}); old.Existing {
		t.Fatalf("dedupe of the old target returned the edited link %q", old.Link.Code)
	}
}

func TestEditRefusals(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(),
		KeyCreateCommand{Key: testAPIKey("aaaaaaaaaaaa", ScopeLinksWrite, "team"), By: RootKeyID, Now: 1}.Encode())
	createOne(t, f, 2, CreateRequest{URL: "https://example.com/", CustomCode: "x"})
	cases := []struct {
		name string
		cmd  EditCommand
		want error
	}{
		{"missing link", EditCommand{Code: "nope", Fields: EditTitle}, ErrNotFound},
		{"key of another workspace", EditCommand{Code: "x", KeyID: "aaaaaaaaaaaa", Now: 3, Fields: EditTitle}, ErrUnauthorized},
		{"javascript target", EditCommand{Code: "x", Fields: EditURL, URL: "javascript:alert(1)"}, ErrInvalidRequest},
		{"too many tags", EditCommand{Code: "x", Fields: EditTags, Tags: make([]string, MaxTags+1)}, ErrInvalidRequest},
		{"rule to a javascript target", EditCommand{Code: "x", Fields: EditRules, Rules: []Rule{{URL: "javascript:x"}}}, ErrInvalidRequest},
	}
	before := f.Get
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err, _ := applyAll(t, f, tc.cmd.Encode())[0].(error)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if l, _ := before("x"); l.URL != "https://example.com/" || l.Options != nil {
				t.Fatalf("a refused edit changed the link: %+v", l)
			}
		})
	}
}

func TestDomainsKeepCodesApart(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	if res := createOne(t, f, 1, CreateRequest{URL: "https://example.com/", CustomCode: "x", Domain: "nowhere.example"}); !errors.Is(res.Err, ErrUnknownDomain) {
		t.Fatalf("create in an unregistered domain: %v", res.Err)
	}
	applyAll(t, f, DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID}.Encode())
	createOne(t, f, 2, CreateRequest{URL: "https://example.com/default", CustomCode: "x"})
	createOne(t, f, 3, CreateRequest{URL: "https://example.com/a", CustomCode: "x", Domain: "a.example"})
	if res := createOne(t, f, 4, CreateRequest{URL: "https://example.com/a2", CustomCode: "x", Domain: "a.example"}); !errors.Is(res.Err, ErrCodeTaken) {
		t.Fatalf("second x in a.example: %v", res.Err)
	}
	createOne(t, f, 3, CreateRequest{URL: "https://example.com/only-default", CustomCode: "y"})
	for host, want := range map[string]string{"a.example": "https://example.com/a", "A.Example:8080": "https://example.com/a", "other.example": "https://example.com/default", "": "https://example.com/default"} {
		if tg, ok := f.Resolve([]byte(host), []byte("x")); !ok || tg.URL != want {
			t.Errorf("x on host %q: %+v, want %s", host, tg, want)
		}
	}
	// A registered domain also serves the default domain's links.
	if tg, ok := f.Resolve([]byte("a.example"), []byte("y")); !ok || tg.URL != "https://example.com/only-default" || !tg.Fallback {
		t.Errorf("y on a.example: %+v, want the default domain's link, marked as a fallback", tg)
	}
	for _, host := range []string{"a.example", "other.example"} {
		if tg, _ := f.Resolve([]byte(host), []byte("x")); tg.Fallback {
			t.Errorf("x on %s is marked as a fallback", host)
		}
	}
	if err, _ := applyAll(t, f, DomainCommand{Domain: Domain{Name: "a.example"}, Remove: true, By: RootKeyID}.Encode())[0].(error); !errors.Is(err, ErrDomainInUse) {
		t.Fatalf("removing a domain with links: %v", err)
	}
	applyAll(t, f, DeleteCommand{Code: "a.example/x", Now: 5}.Encode())
	if res := createOne(t, f, 6, CreateRequest{URL: "https://example.com/a3", CustomCode: "x", Domain: "a.example"}); !errors.Is(res.Err, ErrCodeDeleted) {
		t.Fatalf("re-creating a deleted code: %v, want ErrCodeDeleted", res.Err)
	}
	if err, _ := applyAll(t, f, DomainCommand{Domain: Domain{Name: "a.example"}, Remove: true, By: RootKeyID}.Encode())[0].(error); err != nil {
		t.Fatalf("removing an empty domain: %v", err)
	}
	if err, _ := applyAll(t, f, DomainCommand{Domain: Domain{Name: "b.example"}, By: ""}.Encode())[0].(error); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("a domain without a key: %v", err)
	}
}

func TestResolveDoesNotAllocate(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID}.Encode())
	createOne(t, f, 1, CreateRequest{URL: "https://example.com/a", CustomCode: "x", Domain: "a.example"})
	host, code := []byte("a.example"), []byte("x")
	if n := testing.AllocsPerRun(100, func() { f.Resolve(host, code) }); n != 0 {
		t.Fatalf("Resolve allocates %v times", n)
	}
}

func TestSnapshotKeepsOptionsAndDomains(t *testing.T) {
	f := New()
	applyAll(t, f, optionsWorkload()...)
	raw := snapshotBytes(t, f)
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(raw)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), raw) {
		t.Fatal("a restored state writes a different snapshot")
	}
	a, _ := f.Get("docs")
	b, _ := restored.Get("docs")
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("restored link differs:\n%+v\n%+v", a, b)
	}
	if d := restored.Domains(); len(d) != 1 || d[0].RootRedirect != "https://example.com/home" {
		t.Fatalf("restored domains: %+v", d)
	}
}

// TestVersion4Loads reads a snapshot and a log written by the last build
// before options (testdata/*-v4.bin: the workload with keys) and checks
// both give the state this build makes from the same commands.
func TestVersion4Loads(t *testing.T) {
	current := New()
	applyAll(t, current, append(workload(), keyWorkload()[1:]...)...)
	want := snapshotBytes(t, current)

	snap, err := os.ReadFile("testdata/snapshot-v4.bin")
	if err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(snap)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), want) {
		t.Fatal("a version 4 snapshot restores to a different state")
	}

	raw, err := os.ReadFile("testdata/log-v4.bin")
	if err != nil {
		t.Fatal(err)
	}
	var entries [][]byte
	for len(raw) > 0 {
		n, w := binary.Uvarint(raw)
		if w <= 0 || uint64(len(raw)-w) < n {
			t.Fatal("damaged fixture")
		}
		entries, raw = append(entries, raw[w:w+int(n)]), raw[w+int(n):]
	}
	replayed := New()
	applyAll(t, replayed, entries...)
	if !bytes.Equal(snapshotBytes(t, replayed), want) {
		t.Fatal("a version 4 log replays to a different state")
	}
}

func TestSearchAndTags(t *testing.T) {
	f := New()
	applyAll(t, f, optionsWorkload()...)
	createOne(t, f, 500, CreateRequest{URL: "https://example.com/tagged", Options: &Options{Tags: []string{"GO"}}})
	links, _ := f.Search(nil, Filter{Tag: "go", AnyDomain: true}, 0, 10)
	if len(links) != 1 || links[0].URL != "https://example.com/tagged" {
		t.Fatalf("tag go: %+v", links)
	}
	links, _ = f.Search(nil, Filter{Text: "DOCS 2"}, 0, 10)
	if len(links) != 1 || links[0].Code != "docs" {
		t.Fatalf("text search for the title: %+v", links)
	}
	links, _ = f.Search(nil, Filter{Domain: "go.example"}, 0, 10)
	if len(links) != 1 || links[0].Domain != "go.example" {
		t.Fatalf("domain filter: %+v", links)
	}
	top, _ := f.MostClicked(nil, Filter{AnyDomain: true}, 0, 1)
	if len(top) != 1 || top[0].Clicks != 2 {
		t.Fatalf("most clicked: %+v", top)
	}
	tags := f.Tags(nil, nil)
	if len(tags) != 1 || tags[0] != (TagCount{Tag: "go", Links: 1}) {
		t.Fatalf("tags: %+v", tags)
	}
}

func TestNewCommandsRoundTrip(t *testing.T) {
	for _, cmd := range optionsWorkload() {
		got, err := DecodeCommand(cmd)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		again := got.Encode()
		if !bytes.Equal(again, cmd) {
			t.Fatalf("%T does not round-trip", got)
		}
	}
}

// TestKeysLimitedToDomains: a key limited to a domain writes there and
// nowhere else, whichever node proposes the write; the limit survives a
// snapshot.
func TestKeysLimitedToDomains(t *testing.T) {
	f := New()
	k := testAPIKey("dddddddddddd", ScopeLinksWrite|ScopeLinksRead, AllWorkspaces)
	k.Domains = []string{"a.example"}
	applyAll(t, f, InitCommand{Key: testKey}.Encode(),
		DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID}.Encode(),
		KeyCreateCommand{Key: k, By: RootKeyID, Now: 1}.Encode())
	if res := createOne(t, f, 2, CreateRequest{URL: "https://example.com/", CustomCode: "mine", Domain: "a.example", KeyID: k.ID}); res.Err != nil {
		t.Fatalf("create in its domain: %v", res.Err)
	}
	if res := createOne(t, f, 3, CreateRequest{URL: "https://example.com/", CustomCode: "elsewhere", KeyID: k.ID}); !errors.Is(res.Err, ErrUnauthorized) {
		t.Fatalf("create in the default domain: %v", res.Err)
	}
	createOne(t, f, 4, CreateRequest{URL: "https://example.com/", CustomCode: "theirs"})
	for _, cmd := range [][]byte{
		EditCommand{Code: "theirs", KeyID: k.ID, Now: 5, Fields: EditTitle, Title: "x"}.Encode(),
		DeleteCommand{Code: "theirs", KeyID: k.ID, Now: 5}.Encode(),
	} {
		if err, _ := applyAll(t, f, cmd)[0].(error); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("a write outside its domain: %v", err)
		}
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	if got, _ := restored.Key(k.ID); !reflect.DeepEqual(got.Domains, k.Domains) {
		t.Fatalf("restored key domains: %v", got.Domains)
	}
	admin := testAPIKey("aaaaaaaaaaaa", ScopeAdmin, AllWorkspaces)
	admin.Domains = []string{"a.example"}
	if err, _ := applyAll(t, f, KeyCreateCommand{Key: admin, By: RootKeyID, Now: 6}.Encode())[0].(error); !errors.Is(err, ErrKeyInvalid) {
		t.Fatalf("an admin key limited to a domain: %v", err)
	}
}

// TestOldestFormatThatFits: entries and snapshots use what builds before
// options read for as long as nothing needs more, so a cluster in the
// middle of an upgrade can send its old nodes all it writes.
func TestOldestFormatThatFits(t *testing.T) {
	plain := create(1, CreateRequest{URL: "https://example.com/"})
	withOptions := create(1, CreateRequest{URL: "https://example.com/", Options: &Options{Title: "t"}})
	for _, tc := range []struct {
		name  string
		entry []byte
		want  int
	}{
		{"create without options", plain, LevelKeys},
		{"create with options", withOptions, LevelOptions},
		{"create in a domain", create(1, CreateRequest{URL: "https://example.com/", Domain: "a.example"}), LevelOptions},
		{"delete", DeleteCommand{Code: "x"}.Encode(), LevelKeys},
		{"key without domains", KeyCreateCommand{Key: testAPIKey("aaaaaaaaaaaa", ScopeLinksRead, "*")}.Encode(), LevelKeys},
		{"edit", EditCommand{Code: "x", Fields: EditTitle}.Encode(), LevelOptions},
		{"domain", DomainCommand{Domain: Domain{Name: "a.example"}}.Encode(), LevelOptions},
		{"visit", VisitCommand{Code: "x"}.Encode(), LevelOptions},
	} {
		if got := RequiredLevel(tc.entry); got != tc.want {
			t.Errorf("%s: level %d, want %d", tc.name, got, tc.want)
		}
	}
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), plain)
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV4 {
		t.Fatalf("a state without options writes snapshot version %d, want 4", v)
	}
	applyAll(t, f, withOptions)
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV5 {
		t.Fatalf("a state with options writes snapshot version %d, want %d", v, snapshotV5)
	}
}
