package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/codes"
)

// testKey is a fixed permutation key so test results are reproducible.
var testKey = codes.Key{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

// applyAll feeds encoded commands to f as the log entries after the last
// one it applied, and returns the results.
func applyAll(t testing.TB, f *FSM, cmds ...[]byte) []any {
	t.Helper()
	last, _ := f.Applied()
	logs := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		logs[i] = &raft.Log{Index: last + uint64(i+1), Type: raft.LogCommand, Data: c}
	}
	return f.ApplyBatch(logs)
}

func create(now int64, items ...CreateRequest) []byte {
	for i := range items {
		if items[i].Dedupe || items[i].Strategy == StrategyHash {
			items[i].Canonical, _ = codes.Canonicalize(items[i].URL)
		}
		if items[i].Workspace == "" {
			items[i].Workspace = "default"
		}
		if items[i].CodeLength == 0 {
			items[i].CodeLength = 7
		}
	}
	return CreateBatch{Now: now, Items: items}.Encode()
}

// workload is a command sequence touching every command type and rule.
func workload() [][]byte {
	cmds := [][]byte{InitCommand{Key: testKey}.Encode()}
	for i := range 40 {
		cmds = append(cmds, create(int64(1000+i),
			CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), RequestID: fmt.Sprintf("req-%d", i)},
			CreateRequest{URL: fmt.Sprintf("https://Example.com/%d/", i%5), Dedupe: true, Workspace: "ws"},
			CreateRequest{URL: fmt.Sprintf("https://example.com/h/%d", i%7), Strategy: StrategyHash},
		))
	}
	cmds = append(cmds,
		create(2000, CreateRequest{URL: "https://example.org/", CustomCode: "custom1", ExpiresAt: 2500}),
		DeleteCommand{Code: "custom1", Now: 2100}.Encode(),
		ClickBatch{Node: "n1", Seq: 1, Now: 2200, Counts: []ClickCount{{Code: "custom1", Count: 3}}}.Encode(),
		create(2300, CreateRequest{URL: "https://example.net/", CustomCode: "soon", ExpiresAt: 2400}),
		PurgeCommand{ExpiredBefore: 3000, RequestsBefore: 1010}.Encode(),
		ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:8080"}.Encode(),
		ServerCommand{ID: "n2", HTTPAddr: "10.0.0.2:8080"}.Encode(),
		ServerCommand{ID: "n2"}.Encode(),
	)
	return cmds
}

// restoredOnDisk restores f's snapshot into a new FSM whose engine is in
// a directory, as a node's is, and checks that it writes the same bytes.
func restoredOnDisk(t *testing.T, f *FSM) *FSM {
	t.Helper()
	data := snapshotBytes(t, f)
	restored := onDisk(t)
	t.Cleanup(restored.Close)
	if err := restored.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), data) {
		t.Error("the restored state's snapshot differs")
	}
	return restored
}

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.WriteBackup(&buf); err != nil {
		t.Fatalf("backup: %v", err)
	}
	return buf.Bytes()
}

func TestApplyIsDeterministic(t *testing.T) {
	a, b := New(), New()
	applyAll(t, a, workload()...)
	// The same commands applied one at a time must end in the same state.
	for _, c := range workload() {
		applyAll(t, b, c)
	}
	if sa, sb := snapshotBytes(t, a), snapshotBytes(t, b); !bytes.Equal(sa, sb) {
		t.Fatalf("snapshots differ: %d vs %d bytes", len(sa), len(sb))
	}
	if a.Len() == 0 {
		t.Fatal("workload created no links")
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := New()
	applyAll(t, src, workload()...)
	data := snapshotBytes(t, src)

	dst := New()
	applyAll(t, dst, InitCommand{Key: codes.Key{9}}.Encode(), create(1, CreateRequest{URL: "https://gone.example/"}))
	if err := dst.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := snapshotBytes(t, dst); !bytes.Equal(got, data) {
		t.Fatal("restored state's snapshot differs from the original")
	}
	// The restored FSM keeps going exactly as the original would.
	next := create(5000, CreateRequest{URL: "https://after.example/"})
	ra := applyAll(t, src, next)[0].([]CreateResult)[0]
	rb := applyAll(t, dst, next)[0].([]CreateResult)[0]
	if ra.Err != nil || ra.Link != rb.Link {
		t.Fatalf("after restore: %+v vs %+v", ra, rb)
	}
}

func TestSnapshotRejectsCorruption(t *testing.T) {
	f := New()
	applyAll(t, f, workload()...)
	good := snapshotBytes(t, f)
	cases := map[string][]byte{
		"empty":       {},
		"truncated":   good[:len(good)/2],
		"flipped bit": append(append([]byte{}, good[:40]...), append([]byte{good[40] ^ 1}, good[41:]...)...),
		"not a snap":  []byte("hello world, this is not a backup"),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ReadSnapshot(bytes.NewReader(data)); !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("ReadSnapshot = %v, want ErrCorruptSnapshot", err)
			}
			before := snapshotBytes(t, f)
			if err := f.Restore(nopCloser{bytes.NewReader(data)}); err == nil {
				t.Fatal("Restore accepted a corrupt snapshot")
			}
			if !bytes.Equal(before, snapshotBytes(t, f)) {
				t.Fatal("a failed restore changed the state")
			}
		})
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func createOne(t *testing.T, f *FSM, now int64, r CreateRequest) CreateResult {
	t.Helper()
	res, ok := applyAll(t, f, create(now, r))[0].([]CreateResult)
	if !ok || len(res) != 1 {
		t.Fatalf("create returned %#v", res)
	}
	return res[0]
}

func TestCreateRules(t *testing.T) {
	f := New()
	if r := createOne(t, f, 1, CreateRequest{URL: "https://a.example/"}); !errors.Is(r.Err, ErrNotInitialized) {
		t.Fatalf("create before init: %v", r.Err)
	}
	applyAll(t, f, InitCommand{Key: testKey}.Encode())

	first := createOne(t, f, 10, CreateRequest{URL: "https://a.example/x", CustomCode: "mine"})
	deleted := createOne(t, f, 10, CreateRequest{URL: "https://a.example/y", CustomCode: "gone"})
	applyAll(t, f, DeleteCommand{Code: "gone", Now: 11}.Encode())
	dedupeFirst := createOne(t, f, 12, CreateRequest{URL: "https://B.example/p/", Dedupe: true})

	tests := []struct {
		name     string
		req      CreateRequest
		wantErr  error
		wantCode string
		existing bool
	}{
		{name: "custom code taken", req: CreateRequest{URL: "https://b.example/", CustomCode: "mine"}, wantErr: ErrCodeTaken},
		{name: "deleted code never reused", req: CreateRequest{URL: "https://b.example/", CustomCode: "gone"}, wantErr: ErrCodeTaken},
		{name: "reserved word", req: CreateRequest{URL: "https://b.example/", CustomCode: "Health"}, wantErr: ErrReserved},
		{name: "dedupe finds canonical twin", req: CreateRequest{URL: "https://b.example:443/p", Dedupe: true}, wantCode: dedupeFirst.Link.Code, existing: true},
		{name: "dedupe is per workspace", req: CreateRequest{URL: "https://b.example/p", Dedupe: true, Workspace: "other"}},
		{name: "no dedupe, new link", req: CreateRequest{URL: "https://b.example/p/"}},
		{name: "custom code of same dedupe link", req: CreateRequest{URL: "https://a.example/x", CustomCode: "mine", Dedupe: true}, wantErr: ErrCodeTaken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.Len()
			r := createOne(t, f, 20, tt.req)
			if !errors.Is(r.Err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", r.Err, tt.wantErr)
			}
			if tt.wantCode != "" && r.Link.Code != tt.wantCode {
				t.Fatalf("code = %q, want %q", r.Link.Code, tt.wantCode)
			}
			if r.Existing != tt.existing {
				t.Fatalf("existing = %v, want %v", r.Existing, tt.existing)
			}
			grew := f.Len() - before
			if want := map[bool]int{true: 1, false: 0}[tt.wantErr == nil && !tt.existing]; grew != want {
				t.Fatalf("link count grew by %d, want %d", grew, want)
			}
		})
	}
	if first.Err != nil || deleted.Err != nil {
		t.Fatalf("setup creates failed: %v %v", first.Err, deleted.Err)
	}
}

func TestHashStrategyCollisionUsesNextSalt(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	canonical := "https://example.com/page"
	// Occupy the salt-0 code with an unrelated custom link.
	squatter := codes.HashCode(canonical, "ws", 0)
	if r := createOne(t, f, 1, CreateRequest{URL: "https://other.example/", CustomCode: squatter}); r.Err != nil {
		t.Fatalf("squatter: %v", r.Err)
	}
	r := createOne(t, f, 2, CreateRequest{URL: "https://example.com/page/", Strategy: StrategyHash, Workspace: "ws"})
	if want := codes.HashCode(canonical, "ws", 1); r.Err != nil || r.Link.Code != want {
		t.Fatalf("hash create = %q, %v; want %q", r.Link.Code, r.Err, want)
	}
	again := createOne(t, f, 3, CreateRequest{URL: "HTTPS://EXAMPLE.COM/page", Strategy: StrategyHash, Workspace: "ws"})
	if !again.Existing || again.Link.Code != r.Link.Code {
		t.Fatalf("second hash create = %+v, want the existing link", again)
	}
}

func TestRequestIDMakesCreateIdempotent(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	req := CreateRequest{URL: "https://example.com/once", RequestID: "r-1"}
	a := createOne(t, f, 1, req)
	b := createOne(t, f, 2, req)
	if a.Err != nil || b.Link != a.Link || f.Len() != 1 {
		t.Fatalf("retry created another link: %+v vs %+v (len %d)", a, b, f.Len())
	}
	other := req
	other.URL = "https://example.com/another"
	if r := createOne(t, f, 3, other); !errors.Is(r.Err, ErrRequestIDReused) || f.Len() != 1 {
		t.Fatalf("key reused for another URL: %v (len %d), want ErrRequestIDReused", r.Err, f.Len())
	}
	applyAll(t, f, PurgeCommand{RequestsBefore: 5}.Encode())
	if c := createOne(t, f, 10, req); c.Link.Code == a.Link.Code {
		t.Fatal("request id still remembered after its window was purged")
	}
}

// TestRequestIDMakesCreateInADomainIdempotent: a create resent with its
// request id returns its first link in a registered domain too (the record
// names the link by its qualified code), once the cluster is raised to
// LevelRename; below it, a retry is applied as older builds apply it.
func TestRequestIDMakesCreateInADomainIdempotent(t *testing.T) {
	for _, custom := range []string{"", "mine"} {
		f := New()
		applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: EntryLevel}.Encode(),
			DomainCommand{Domain: Domain{Name: "go.example"}, By: RootKeyID, Now: 1}.Encode())
		req := CreateRequest{URL: "https://example.com/once", Domain: "go.example", CustomCode: custom, RequestID: "r-1"}
		a := createOne(t, f, 2, req)
		b := createOne(t, f, 3, req)
		if a.Err != nil || b.Err != nil || b.Link != a.Link || f.Len() != 1 {
			t.Fatalf("custom code %q: a retry in a domain answered %+v after %+v (%d links), want the first link", custom, b, a, f.Len())
		}
	}
}

func TestClickBatchesApplyOnce(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	code := createOne(t, f, 1, CreateRequest{URL: "https://example.com/c"}).Link.Code
	batch := ClickBatch{Node: "n1", Seq: 7, Now: 50, Counts: []ClickCount{{Code: code, Count: 5}}}.Encode()
	res := applyAll(t, f, batch, batch)
	other := ClickBatch{Node: "n2", Seq: 1, Now: 60, Counts: []ClickCount{{Code: code, Count: 2}, {Code: "nope", Count: 1}}}.Encode()
	applyAll(t, f, other)
	l, _ := f.Get(code)
	if res[0] != true || res[1] != false || l.Clicks != 7 || l.LastAccess != 60 {
		t.Fatalf("results %v, clicks %d, last access %d; want true,false, 7, 60", res, l.Clicks, l.LastAccess)
	}
}

func TestCounterCodesSkipTakenCodes(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	next, _ := codes.CounterCode(testKey, 0, 7)
	createOne(t, f, 1, CreateRequest{URL: "https://example.com/a", CustomCode: next})
	r := createOne(t, f, 2, CreateRequest{URL: "https://example.com/b"})
	if want, _ := codes.CounterCode(testKey, 1, 7); r.Err != nil || r.Link.Code != want {
		t.Fatalf("counter create = %q, %v; want %q (counter 0 is taken)", r.Link.Code, r.Err, want)
	}
}

func TestListNewestFirstWithCursor(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	var want []string
	for i := range 7 {
		want = append([]string{createOne(t, f, int64(i), CreateRequest{URL: fmt.Sprintf("https://e.example/%d", i)}).Link.Code}, want...)
	}
	applyAll(t, f, DeleteCommand{Code: want[2]}.Encode())
	want = append(want[:2], want[3:]...)
	var got []string
	var cursor uint64
	for range 10 {
		page, next := f.List([]string{"default"}, cursor, 4)
		for _, l := range page {
			got = append(got, l.Code)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

func TestDecodeCommandRejectsGarbage(t *testing.T) {
	valid := create(1, CreateRequest{URL: "https://example.com/"})
	for name, data := range map[string][]byte{
		"empty":          nil,
		"unknown type":   {99},
		"truncated":      valid[:len(valid)-3],
		"trailing bytes": append(append([]byte{}, valid...), 0),
		"huge count":     {byte(cmdCreate), 2, 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		if _, err := DecodeCommand(data); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range append(append(append(workload(), keyWorkload()...), optionsWorkload()...), webhookWorkload()...) {
		f.Add(c)
	}
	f.Add(visitorsAt("n1", 1, 5, ClickCount{Code: "c", Count: 2, Visitor: chromeDE}, ClickCount{Code: "c", Count: 1, Visitor: slackbot}))
	f.Add(VisitCommand{Code: "c", Now: 5, HasVisitor: true, Visitor: safariUS}.Encode())
	imported := importedLink("imp", importedAt, 42)
	imported.Options = &Options{Title: "t", Tags: []string{"a"}}
	f.Add(create(importNow, imported, CreateRequest{URL: "https://example.com/plain"}, importedLink("late", importNow+1, MaxImportedClicks+1)))
	for _, c := range visitRowsCommands() {
		f.Add(c.Encode())
	}
	for _, c := range renameWorkload() {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := DecodeCommand(data)
		if err != nil {
			return
		}
		// Whatever decodes must apply without panicking.
		fm := New()
		defer fm.Close()
		fm.s.apply(data)
		_ = cmd
	})
}

// FuzzReadSnapshot fuzzes the snapshot body; the harness adds the magic and
// a valid checksum so the decoder itself, not just the CRC check, is reached.
func FuzzReadSnapshot(f *testing.F) {
	src := New()
	applyAll(f, src, workload()...)
	clicked, _ := withClickHours(f)
	keyed := New()
	applyAll(f, keyed, keyWorkload()...)
	withOptions := New()
	applyAll(f, withOptions, optionsWorkload()...)
	visited, _ := withVisitors(f)
	withHooks := New()
	applyAll(f, withHooks, webhookWorkload()...)
	imported := New()
	applyAll(f, imported, InitCommand{Key: testKey}.Encode(), create(importNow, importedLink("imp", importedAt, 42)))
	withTallies, _ := tallied(f)
	for _, good := range [][]byte{snapshotBytes(f, src), snapshotBytes(f, clicked), snapshotBytes(f, keyed), snapshotBytes(f, withOptions), snapshotBytes(f, visited), snapshotBytes(f, withHooks), snapshotBytes(f, imported), snapshotBytes(f, withTallies)} {
		f.Add(good[len(snapshotMagic) : len(good)-4])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		data := append(append([]byte{}, snapshotMagic...), body...)
		data = binary.BigEndian.AppendUint32(data, crc32.Checksum(data, crcTable))
		snap, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			return
		}
		defer snap.Close()
		restored := New()
		defer restored.Close()
		if err := restored.Restore(nopCloser{bytes.NewReader(data)}); err != nil {
			t.Fatalf("ReadSnapshot accepted what Restore refused: %v", err)
		}
		if restored.Len() != snap.Links() {
			t.Fatalf("restored %d links, snapshot has %d", restored.Len(), snap.Links())
		}
	})
}

func TestListAcrossWorkspaces(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	byWS := map[string][]string{}
	var all []string
	for i := range 9 {
		ws := []string{"a", "b", "c"}[i%3]
		code := createOne(t, f, int64(i), CreateRequest{URL: fmt.Sprintf("https://e.example/%d", i), Workspace: ws}).Link.Code
		byWS[ws] = append([]string{code}, byWS[ws]...)
		all = append([]string{code}, all...)
	}
	pages := func(workspaces []string, size int) []string {
		var got []string
		var cursor uint64
		for range 20 {
			page, next := f.List(workspaces, cursor, size)
			for _, l := range page {
				got = append(got, l.Code)
			}
			if next == 0 {
				return got
			}
			cursor = next
		}
		t.Fatal("the cursor never ended")
		return nil
	}
	abWant := []string{}
	for _, c := range all {
		if slices.Contains(byWS["a"], c) || slices.Contains(byWS["b"], c) {
			abWant = append(abWant, c)
		}
	}
	for _, tc := range []struct {
		name       string
		workspaces []string
		want       []string
	}{
		{"all", nil, all},
		{"one", []string{"b"}, byWS["b"]},
		{"two", []string{"a", "b"}, abWant},
		{"unknown", []string{"zzz"}, nil},
		{"none", []string{}, nil},
	} {
		for _, size := range []int{1, 2, 4, 100} {
			if got := pages(tc.workspaces, size); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s, pages of %d: %v, want %v", tc.name, size, got, tc.want)
			}
		}
	}
}

// Links is every live link, oldest first, read as an export reads them: a
// page of LinksAfter at a time.
func (f *FSM) Links() []Link {
	var links []Link
	for after := uint64(0); ; {
		page, next := f.LinksAfter(after, 100)
		links = append(links, page...)
		if next == 0 {
			return links
		}
		after = next
	}
}

// TestLinksAfter: pages of every size walk the live links, oldest first,
// each once, as a walk of every record finds them, in a state whose ids
// skip deleted links and in one restored from it (packed); a cursor in a
// gap or past the last link starts where it should.
func TestLinksAfter(t *testing.T) {
	f := onDisk(t)
	t.Cleanup(f.Close)
	loadLinks(t, f, 2500, imported)
	var deletes [][]byte
	for i := 0; i < 2500; i += 3 {
		deletes = append(deletes, DeleteCommand{Code: fmt.Sprintf("c%07d", i), Now: 9000, KeyID: RootKeyID}.Encode())
	}
	applyAll(t, f, deletes...)
	for _, g := range []*FSM{f, restoredOnDisk(t, f)} {
		var want []uint64
		g.mu.RLock()
		g.s.links.recs.scan(false, func(r *record) bool {
			if r.live() {
				want = append(want, r.id)
			}
			return true
		})
		g.mu.RUnlock()
		for _, limit := range []int{1, 7, 1024, 5000} {
			var got []uint64
			for after := uint64(0); ; {
				page, next := g.LinksAfter(after, limit)
				if len(page) > limit || next != 0 && len(page) != limit {
					t.Fatalf("limit %d after %d: %d links, next %d", limit, after, len(page), next)
				}
				for _, l := range page {
					got = append(got, l.ID)
				}
				if next == 0 {
					break
				}
				after = next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("limit %d: %d links walked, want %d", limit, len(got), len(want))
			}
		}
		if page, _ := g.LinksAfter(want[0], 1); len(page) != 1 || page[0].ID != want[1] {
			t.Errorf("after the first link: %v, want link %d", page, want[1])
		}
		if page, next := g.LinksAfter(want[len(want)-1], 10); len(page) != 0 || next != 0 {
			t.Errorf("after the last link: %d links, next %d", len(page), next)
		}
	}
}
