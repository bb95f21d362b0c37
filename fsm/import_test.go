package fsm

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
)

// Times of the import tests: the import runs in 2027, the links it brings
// were created in 2020.
const (
	importNow  = int64(1_800_000_000_000)
	importedAt = int64(1_600_000_000_000)
)

// importedLink is a create as an import proposes it.
func importedLink(code string, created int64, clicks uint64) CreateRequest {
	return CreateRequest{URL: "https://example.com/" + code, CustomCode: code, CreatedAt: created, Clicks: clicks, KeyID: RootKeyID}
}

// TestImportedCreate: an import's create keeps the creation time and
// starts the click total it brings; the state machine refuses what no
// export can hold, and a refused item changes nothing.
func TestImportedCreate(t *testing.T) {
	for _, tc := range []struct {
		name        string
		req         CreateRequest
		wantCreated int64
		wantClicks  uint64
		wantErr     string // "" for a created link
	}{
		{"both kept", importedLink("both", importedAt, 42), importedAt, 42, ""},
		{"creation time alone", importedLink("created", importedAt, 0), importedAt, 0, ""},
		{"clicks alone: created at the entry's time", importedLink("clicked", 0, 7), importNow, 7, ""},
		{"created at the entry's very time", importedLink("just-now", importNow, 1), importNow, 1, ""},
		{"created in the first millisecond of 1970", importedLink("epoch", 1, 0), 1, 0, ""},
		{"the largest click total", importedLink("max", importedAt, MaxImportedClicks), importedAt, MaxImportedClicks, ""},
		{"created after the entry's time", importedLink("future", importNow+1, 3), 0, 0, "after the time of the import"},
		{"created before 1970", importedLink("before-1970", -1, 3), 0, 0, "before 1970"},
		{"more clicks than any link had", importedLink("absurd", importedAt, MaxImportedClicks+1), 0, 0, "click total"},
		{"a click total that would overflow", importedLink("overflow", importedAt, math.MaxUint64), 0, 0, "click total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			applyAll(t, f, InitCommand{Key: testKey}.Encode())
			res := createOne(t, f, importNow, tc.req)
			if tc.wantErr != "" {
				if !errors.Is(res.Err, ErrInvalidRequest) || !bytes.Contains([]byte(res.Err.Error()), []byte(tc.wantErr)) {
					t.Fatalf("create: %v, want ErrInvalidRequest saying %q", res.Err, tc.wantErr)
				}
				if f.Len() != 0 || len(f.Audit(AuditQuery{Limit: 10})) != 0 {
					t.Fatalf("a refused import changed the state: %d links, audit %v", f.Len(), f.Audit(AuditQuery{Limit: 10}))
				}
				// No code was drawn: the next counter create gets the
				// first code, as on a state that never saw the refusal.
				fresh := New()
				applyAll(t, fresh, InitCommand{Key: testKey}.Encode())
				a := createOne(t, f, importNow, CreateRequest{URL: "https://example.com/next"})
				b := createOne(t, fresh, importNow, CreateRequest{URL: "https://example.com/next"})
				if a.Err != nil || a.Link != b.Link {
					t.Fatalf("after a refused import: %+v, want %+v", a, b)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("create: %v", res.Err)
			}
			l, ok := f.Get(tc.req.CustomCode)
			if !ok || l.CreatedAt != tc.wantCreated || l.Clicks != tc.wantClicks || l.LastAccess != 0 {
				t.Fatalf("link %+v, want created %d, %d clicks, never accessed", l, tc.wantCreated, tc.wantClicks)
			}
			if res.Link != l {
				t.Fatalf("the create answered %+v, the state holds %+v", res.Link, l)
			}
		})
	}
}

// TestImportedClicksHaveNoHourOrVisitor: imported clicks count in the
// link's total, in its tag's and workspace's totals and towards a visit
// limit, but in no hour and no visitor breakdown; later clicks add to
// them as usual.
func TestImportedClicksHaveNoHourOrVisitor(t *testing.T) {
	f := New()
	tagged := importedLink("tagged", importedAt, 40)
	tagged.Options = &Options{Tags: []string{"moved"}}
	limited := importedLink("limited", importedAt, 3)
	limited.Options = &Options{MaxVisits: 3}
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(importNow, tagged, limited))

	if hours, _ := f.ClickHours("tagged", 0, math.MaxInt64); len(hours) != 0 {
		t.Errorf("imported clicks fell in hours: %v", hours)
	}
	if v, _ := f.LinkVisits("tagged", 0, math.MaxInt64, ByCountry); v.LinkTotal != 40 || v.Clicks != 0 || len(v.Groups) != 0 {
		t.Errorf("visits of an imported link: total %d, with visitors %d, groups %v; want 40, 0, none", v.LinkTotal, v.Clicks, v.Groups)
	}
	if tags := f.Tags(nil, nil); len(tags) != 1 || tags[0].Clicks != 40 {
		t.Errorf("tag totals: %+v, want moved with 40 clicks", tags)
	}
	if v := f.WorkspaceVisits([]string{"default"}, Filter{AnyDomain: true}, 0, math.MaxInt64, ByCountry); v.LinkTotal != 43 {
		t.Errorf("workspace total: %d, want 43", v.LinkTotal)
	}
	// The limit counts what the link had: it is used up.
	if err, _ := applyAll(t, f, VisitCommand{Code: "limited", Now: importNow + 1}.Encode())[0].(error); !errors.Is(err, ErrVisitLimit) {
		t.Errorf("a visit to an imported link at its limit: %v, want ErrVisitLimit", err)
	}

	clickAt := importNow + 5000
	applyAll(t, f, ClickBatch{Node: "n1", Seq: 1, Now: clickAt, Counts: []ClickCount{{Code: "tagged", Count: 2}}}.Encode())
	l, _ := f.Get("tagged")
	hours, _ := f.ClickHours("tagged", 0, math.MaxInt64)
	if l.Clicks != 42 || l.LastAccess != clickAt || len(hours) != 1 || hours[0].Clicks != 2 {
		t.Errorf("after 2 clicks: %d clicks, last access %d, hours %v; want 42, %d, one hour of 2", l.Clicks, l.LastAccess, hours, clickAt)
	}
}

// TestImportedEntryEncoding: an entry carries creation times and clicks
// only when some create of it has them, as type 21 (LevelImport); every
// other create is written as before, so a cluster whose older servers
// cannot read type 21 never meets it unless an import brings them.
func TestImportedEntryEncoding(t *testing.T) {
	plain := CreateRequest{URL: "https://example.com/plain", Workspace: "default", CodeLength: 7}
	withTitle := CreateRequest{URL: "https://example.com/t", Workspace: "default", CodeLength: 7, Options: &Options{Title: "t"}}
	imported := CreateRequest{URL: "https://example.com/i", Workspace: "default", CustomCode: "imp", CreatedAt: importedAt, Clicks: 9}
	for _, tc := range []struct {
		name      string
		items     []CreateRequest
		wantType  commandType
		wantLevel int
	}{
		{"plain create", []CreateRequest{plain}, cmdCreateKeyed, LevelKeys},
		{"create with options", []CreateRequest{withTitle}, cmdCreateOptions, LevelOptions},
		{"imported creation time", []CreateRequest{{URL: "https://example.com/c", Workspace: "default", CreatedAt: importedAt}}, cmdCreateImported, LevelImport},
		{"imported clicks", []CreateRequest{{URL: "https://example.com/c", Workspace: "default", Clicks: 1}}, cmdCreateImported, LevelImport},
		{"one imported item makes the entry type 21", []CreateRequest{plain, withTitle, imported}, cmdCreateImported, LevelImport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := CreateBatch{Now: importNow, Items: tc.items}
			entry := batch.Encode()
			if typ := commandType(entry[0] &^ sealedFlag); typ != tc.wantType {
				t.Errorf("type %d, want %d", typ, tc.wantType)
			}
			if got := RequiredLevel(entry); got != tc.wantLevel {
				t.Errorf("level %d, want %d", got, tc.wantLevel)
			}
			cmd, err := DecodeCommand(entry)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(cmd, batch) {
				t.Errorf("decoded %+v, want %+v", cmd, batch)
			}
		})
	}
	if EntryLevel < LevelImport {
		t.Errorf("this build applies level %d, below the level of what it writes", EntryLevel)
	}
}

// TestImportedLinksSurviveSnapshots: a snapshot keeps imported creation
// times and clicks in the link records every version has, so a state
// holding nothing newer still writes the version older builds read.
func TestImportedLinksSurviveSnapshots(t *testing.T) {
	withTitle := importedLink("titled", importedAt+1, 5)
	withTitle.Options = &Options{Title: "Titled"}
	for _, tc := range []struct {
		name        string
		items       []CreateRequest
		wantVersion byte
	}{
		{"imported links alone", []CreateRequest{importedLink("a", importedAt, 42), importedLink("b", 0, 3)}, snapshotV4},
		{"imported links with options", []CreateRequest{importedLink("a", importedAt, 42), withTitle}, snapshotV5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := New()
			applyAll(t, src, InitCommand{Key: testKey}.Encode(), create(importNow, tc.items...))
			data := snapshotBytes(t, src)
			if v := data[len(snapshotMagic)]; v != tc.wantVersion {
				t.Errorf("snapshot version %d, want %d", v, tc.wantVersion)
			}
			if src.Level() >= LevelImport {
				t.Errorf("state level %d: imported values need no newer build to be held", src.Level())
			}
			dst := New()
			if err := dst.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if !reflect.DeepEqual(dst.Links(), src.Links()) {
				t.Errorf("restored links %+v, want %+v", dst.Links(), src.Links())
			}
			if !bytes.Equal(snapshotBytes(t, dst), data) {
				t.Error("the restored state's snapshot differs")
			}
			if l, _ := dst.Get("a"); l.CreatedAt != importedAt || l.Clicks != 42 {
				t.Errorf("restored link a: %+v", l)
			}
		})
	}
}
