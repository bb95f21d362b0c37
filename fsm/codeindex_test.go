package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// reuseCode moves code from its live link to a new link, as no command
// does (a deleted code is a tombstone): the shape of a code cache slot
// left by a code that a newer link took over.
func reuseCode(t *testing.T, f *FSM, code, url string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.s
	p, ok := s.links.lookup(code)
	if !ok {
		t.Fatalf("%s is not live", code)
	}
	s.links.remove(p)
	s.lastID++
	s.links.insert(record{id: s.lastID, createdAt: 1}, code, url, "default", "", false)
	if err := s.eng.settle(); err != nil {
		t.Fatal(err)
	}
}

// TestStaleCodeCacheSlotsNeverAnswer: a code cache slot left by a link
// deleted, purged or renamed away, or by a code a newer link took over,
// still names the old position; every path that looks the code up (a
// redirect, a create of it, a rename to it) answers as if the slot were
// empty.
func TestStaleCodeCacheSlotsNeverAnswer(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  func(t *testing.T, f *FSM)
		url     string // the link "a" redirects to after the change; "": none
		refusal error  // what a create of "a" and a rename to "a" get
	}{
		{"deleted", func(t *testing.T, f *FSM) {
			applyAll(t, f, DeleteCommand{Code: "a", Now: 20}.Encode())
		}, "", ErrCodeDeleted},
		{"purged", func(t *testing.T, f *FSM) {
			applyAll(t, f, PurgeCommand{ExpiredBefore: 1000}.Encode())
		}, "", ErrCodeDeleted},
		{"renamed", func(t *testing.T, f *FSM) {
			applyAll(t, f, RenameCommand{NewCode: "b", Edit: EditCommand{Code: "a", Now: 20, KeyID: RootKeyID}}.Encode())
		}, "", ErrCodeDeleted},
		{"taken over", func(t *testing.T, f *FSM) {
			reuseCode(t, f, "a", "https://example.com/newer")
		}, "https://example.com/newer", ErrCodeTaken},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine")})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseRename,
				create(10, CreateRequest{URL: "https://example.com/a", CustomCode: "a", ExpiresAt: 500},
					CreateRequest{URL: "https://example.com/other", CustomCode: "other"}))
			if _, ok := f.Lookup([]byte("a")); !ok {
				t.Fatal("a is not found before the change")
			}
			h := f.s.links.codes.hash("a")
			before, cached := f.s.links.codes.cache.get(h)
			if !cached {
				t.Fatal("a redirect did not fill the code cache")
			}
			c.change(t, f)
			if p, ok := f.s.links.codes.cache.get(h); !ok || p != before {
				t.Fatalf("the slot of a holds %d, %v: want the stale position %d", p, ok, before)
			}
			tg, ok := f.Lookup([]byte("a"))
			if ok != (c.url != "") || ok && tg.URL != c.url {
				t.Fatalf("Lookup(a) after the change: %+v, %v; want %q", tg, ok, c.url)
			}
			if c.name == "renamed" {
				if tg, ok := f.Lookup([]byte("b")); !ok || tg.URL != "https://example.com/a" {
					t.Fatalf("Lookup(b) after the rename: %+v, %v", tg, ok)
				}
			}
			if res := createOne(t, f, 30, CreateRequest{URL: "https://example.com/third", CustomCode: "a"}); !errors.Is(res.Err, c.refusal) {
				t.Fatalf("create of a: %+v, want %v", res, c.refusal)
			}
			rename := RenameCommand{NewCode: "a", Edit: EditCommand{Code: "other", Now: 40, KeyID: RootKeyID}}
			if err, _ := applyAll(t, f, rename.Encode())[0].(error); !errors.Is(err, c.refusal) {
				t.Fatalf("rename of other to a: %v, want %v", err, c.refusal)
			}
		})
	}
}

// TestCachedRedirectDoesNotAllocate: a redirect whose code and record are
// cached allocates nothing, so it reads no disk (a read of the engine
// allocates its key), in the default domain and in a registered one.
func TestCachedRedirectDoesNotAllocate(t *testing.T) {
	f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID}.Encode(),
		create(1, CreateRequest{URL: "https://example.com/x", CustomCode: "x"},
			CreateRequest{URL: "https://example.com/y", CustomCode: "y", Domain: "a.example"}))
	for _, q := range []struct{ host, code string }{{"", "x"}, {"a.example", "y"}} {
		host, code := []byte(q.host), []byte(q.code)
		if n := testing.AllocsPerRun(100, func() {
			if _, ok := f.Resolve(host, code); !ok {
				t.Fatalf("%s/%s not found", q.host, q.code)
			}
		}); n != 0 {
			t.Errorf("a cached redirect of %s on %q allocates %v times", q.code, q.host, n)
		}
	}
}

// TestCodeTakenTwiceInOneBatch: the code index is read through the apply
// batch, so a code taken by an earlier entry, or an earlier item of the
// same create batch, or by a rename, is taken for the rest of the batch.
func TestCodeTakenTwiceInOneBatch(t *testing.T) {
	f := New()
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseRename,
		create(1, CreateRequest{URL: "https://example.com/old", CustomCode: "old"}))
	last, _ := f.Applied()
	entries := [][]byte{
		create(2, CreateRequest{URL: "https://example.com/1", CustomCode: "twice"}),
		create(3, CreateRequest{URL: "https://example.com/2", CustomCode: "twice"}),
		create(4, CreateRequest{URL: "https://example.com/3", CustomCode: "pair"},
			CreateRequest{URL: "https://example.com/4", CustomCode: "pair"}),
		RenameCommand{NewCode: "moved", Edit: EditCommand{Code: "old", Now: 5, KeyID: RootKeyID}}.Encode(),
		create(6, CreateRequest{URL: "https://example.com/5", CustomCode: "moved"}),
	}
	logs := make([]*raft.Log, len(entries))
	for i, e := range entries {
		logs[i] = &raft.Log{Index: last + uint64(i) + 1, Type: raft.LogCommand, Data: e}
	}
	res := f.ApplyBatch(logs)
	results := func(i int) []CreateResult { return res[i].([]CreateResult) }
	if r := results(0)[0]; r.Err != nil {
		t.Fatalf("first create of twice: %v", r.Err)
	}
	for _, got := range []struct {
		what string
		r    CreateResult
	}{{"second create of twice", results(1)[0]}, {"second item pair", results(2)[1]}, {"create of a code renamed to", results(4)[0]}} {
		if !errors.Is(got.r.Err, ErrCodeTaken) || errors.Is(got.r.Err, ErrCodeDeleted) {
			t.Errorf("%s in the same batch: %+v, want ErrCodeTaken", got.what, got.r)
		}
	}
	if err, _ := res[3].(error); err != nil {
		t.Fatalf("rename: %v", err)
	}
	for code, url := range map[string]string{"twice": "https://example.com/1", "pair": "https://example.com/3", "moved": "https://example.com/old"} {
		if tg, ok := f.Lookup([]byte(code)); !ok || tg.URL != url {
			t.Errorf("%s: %+v, %v; want %s", code, tg, ok, url)
		}
	}
	if _, ok := f.Lookup([]byte("old")); ok {
		t.Error("old still answers after its rename")
	}
	if got := f.Len(); got != 3 {
		t.Errorf("%d live links, want 3", got)
	}
}

// TestCodeIndexIsOnDisk: every live link's code is a key of the engine
// holding its position, a dead link's is not, and a restore writes the
// same keys.
func TestCodeIndexIsOnDisk(t *testing.T) {
	f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, recordWorkload()...)
	want := codeKeys(t, f)
	links := f.Links()
	if len(want) != len(links) || len(links) != f.Len() {
		t.Fatalf("%d code keys, %d links, count %d", len(want), len(links), f.Len())
	}
	for _, l := range links {
		p, ok := want[l.Qualified()]
		if !ok || f.s.links.recs.at(p).id != l.ID {
			t.Errorf("%s: key %v at %d", l.Qualified(), ok, p)
		}
	}
	g, err := Open(Config{Dir: filepath.Join(t.TempDir(), "restored")})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	got := codeKeys(t, g)
	if len(got) != len(want) || g.Len() != len(want) {
		t.Fatalf("restored: %d code keys, count %d; want %d", len(got), g.Len(), len(want))
	}
	for code := range want {
		if _, ok := got[code]; !ok {
			t.Errorf("restored state lacks the key of %s", code)
		}
	}
}

// TestRestoreRefusesACodeTwice: a snapshot whose links section holds one
// code twice does not restore, and names the code; the restore checks it
// once the links are in, by the code keys' count, not a seek per link.
func TestRestoreRefusesACodeTwice(t *testing.T) {
	f := New()
	defer f.Close()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), create(1,
		CreateRequest{URL: "https://example.com/1", CustomCode: "first1"},
		CreateRequest{URL: "https://example.com/2", CustomCode: "twice1"},
		CreateRequest{URL: "https://example.com/3", CustomCode: "third1"},
		CreateRequest{URL: "https://example.com/4", CustomCode: "twice2"}))
	good := snapshotBytes(t, f)
	if err := New().Restore(nopCloser{bytes.NewReader(good)}); err != nil {
		t.Fatalf("the snapshot before the change: %v", err)
	}
	bad := bytes.Replace(bytes.Clone(good), []byte("twice2"), []byte("twice1"), 1)
	if bytes.Equal(bad, good) {
		t.Fatal("the code is not in the snapshot as written")
	}
	binary.BigEndian.PutUint32(bad[len(bad)-4:], crc32.Checksum(bad[:len(bad)-4], crcTable))
	err := New().Restore(nopCloser{bytes.NewReader(bad)})
	if err == nil || !strings.Contains(err.Error(), `code "twice1" appears twice`) {
		t.Fatalf("a snapshot with a code twice: %v", err)
	}
}

// TestCodeFilterNeverMissesATakenCode: every code added is held, and at
// 6 codes a word most codes never added are answered without the engine.
func TestCodeFilterNeverMissesATakenCode(t *testing.T) {
	x := newCodeIndex(&engine{recordCache: 1 << 10}, maphash.MakeSeed())
	const added = 6 << 10
	for i := range added {
		x.filter.add(x.hash(fmt.Sprintf("code%d", i)))
	}
	for i := range added {
		if !x.filter.mayHold(x.hash(fmt.Sprintf("code%d", i))) {
			t.Fatalf("code%d was added and is not held", i)
		}
	}
	held := 0
	for i := range 100_000 {
		if x.filter.mayHold(x.hash(fmt.Sprintf("other%d", i))) {
			held++
		}
	}
	if held > 3_000 {
		t.Errorf("%d of 100,000 codes never added may be held, want about 1.5 %%", held)
	}
}

// codeKeys is the engine's code index: code → position.
func codeKeys(t *testing.T, f *FSM) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := f.s.eng.st.Scan([]byte{codePrefix}, nil, func(key, value []byte) bool {
		p, ok := positionFrom(value)
		if !ok {
			t.Errorf("%q holds %x", key, value)
		}
		out[string(key[1:])] = p
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
