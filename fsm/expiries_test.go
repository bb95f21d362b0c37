package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/linkraft/linkraft/fsm/store"
)

// expiryWorkload gives links expiries and changes them every way a link's
// expiry, liveness or disabled flag changes: creates, edits that set,
// move and clear an expiry, an expiry set in the past (disabled on
// purpose from LevelDisabled on), a delete, a rename and purges.
func expiryWorkload() [][]byte {
	edit := func(code string, now, expires int64) []byte {
		return EditCommand{Code: code, Now: now, KeyID: RootKeyID, Fields: EditExpiresAt, ExpiresAt: expires}.Encode()
	}
	return append(workload(),
		create(4000, CreateRequest{URL: "https://example.com/e1", CustomCode: "e1", ExpiresAt: 5000}),
		create(4001, CreateRequest{URL: "https://example.com/e2", CustomCode: "e2", ExpiresAt: 9000}),
		create(4002, CreateRequest{URL: "https://example.com/e3", CustomCode: "e3", ExpiresAt: 6000}),
		create(4003, CreateRequest{URL: "https://example.com/e4", CustomCode: "e4", ExpiresAt: 6000}),
		create(4004, CreateRequest{URL: "https://example.com/e5", CustomCode: "e5", ExpiresAt: 7000}),
		create(4005, CreateRequest{URL: "https://example.com/e6", CustomCode: "e6"}),
		edit("e2", 4100, 5500), // moved earlier
		edit("e3", 4101, 0),    // cleared
		edit("e6", 4102, 5200), // set
		DeleteCommand{Code: "e4", Now: 4103, KeyID: RootKeyID}.Encode(),
		RaiseCommand{To: LevelDisabled}.Encode(),
		edit("e5", 4200, 4200), // disabled on purpose: the purge leaves it
		RenameCommand{NewCode: "e1b", Edit: EditCommand{Code: "e1", Now: 4300, KeyID: RootKeyID}}.Encode(),
		PurgeCommand{ExpiredBefore: 5300}.Encode(), // e1b, e6
		create(5400, CreateRequest{URL: "https://example.com/e7", CustomCode: "e7", ExpiresAt: 5450}),
		PurgeCommand{ExpiredBefore: 10000}.Encode(), // e2, e7
	)
}

// expiriesOf is the expiry index, by link id: what the purge finds.
func expiriesOf(s *state) map[uint64]int64 {
	got := map[uint64]int64{}
	s.eng.scan([]byte{expiryPrefix}, nil, func(key, _ []byte) bool {
		p, ok := positionFrom(key[9:])
		if !ok {
			panic(fmt.Sprintf("expiry key %x holds no position", key))
		}
		got[s.links.recs.at(p).id] = int64(binary.BigEndian.Uint64(key[1:]) ^ (1 << 63))
		return true
	})
	return got
}

// TestExpiryIndex: after every command of a workload that changes links'
// expiries every way it can, the expiry index holds exactly the live
// links with an expiry that are not disabled on purpose, under their
// expiry, as a walk of every record finds them, and a restore builds the
// same; the purges removed what a walk would have.
func TestExpiryIndex(t *testing.T) {
	f, err := Open(Config{Dir: filepath.Join(t.TempDir(), "engine")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, cmd := range expiryWorkload() {
		applyAll(t, f, cmd)
		want := map[uint64]int64{}
		f.s.links.recs.scan(false, func(r *record) bool {
			if at := expiryOf(r); at != 0 {
				want[r.id] = at
			}
			return true
		})
		if got := expiriesOf(f.s); !maps.Equal(got, want) {
			t.Fatalf("after command %d the index holds %v, the records %v", i, got, want)
		}
	}
	var live []string
	for _, l := range f.Links() {
		if l.ExpiresAt != 0 {
			live = append(live, l.Code)
		}
	}
	if slices.Sort(live); !slices.Equal(live, []string{"e5"}) {
		t.Errorf("links with an expiry after the purges: %v, want only e5, disabled on purpose", live)
	}
	// An entry the index should not hold (damage, a bug) removes nothing:
	// the record decides.
	f.mu.Lock()
	p, ok := f.s.links.lookup("e3")
	f.s.eng.set(expiryKey(nil, 1, p), nil)
	f.mu.Unlock()
	applyAll(t, f, PurgeCommand{ExpiredBefore: 20000}.Encode())
	if _, held := f.Lookup([]byte("e3")); !ok || !held {
		t.Error("a stale index entry purged a link without an expiry")
	}
	restored := restoredOnDisk(t, f)
	want := expiriesOf(f.s)
	delete(want, f.s.links.recs.at(p).id) // the stale entry: a restore indexes the records
	if got := expiriesOf(restored.s); !maps.Equal(got, want) {
		t.Errorf("a restore indexes %v, the state %v", got, want)
	}
}

// TestResumeIndexesAnOlderLayout: a state kept by a build before the
// expiry index (its engine has none, its state file an older layout) is
// indexed as it is resumed, so that its purges remove what the other
// nodes' remove.
func TestResumeIndexesAnOlderLayout(t *testing.T) {
	dir := t.TempDir()
	f := openIn(t, dir)
	cmds := expiryWorkload()
	applyAll(t, f, cmds[:len(cmds)-3]...) // before the purges: three links indexed
	want := expiriesOf(f.s)
	index, err := f.Keep()
	if err != nil || len(want) != 3 {
		t.Fatalf("keep at %d: %v; %d links indexed", index, err, len(want))
	}
	kept := filepath.Join(dir, keptDir)
	eng := newEngine(kept, store.Options{NoLog: true}, 16, 16)
	if !eng.ready() {
		t.Fatal(eng.err)
	}
	var keys [][]byte
	eng.scan([]byte{expiryPrefix}, nil, func(key, _ []byte) bool {
		keys = append(keys, slices.Clone(key))
		return true
	})
	if len(keys) != len(want) {
		t.Fatalf("the kept engine holds %d expiry keys, want %d", len(keys), len(want))
	}
	for _, key := range keys {
		eng.delete(key)
	}
	g := resumeAsKeptBy(t, eng, dir, index, 2)
	if got := expiriesOf(g.s); !maps.Equal(got, want) {
		t.Errorf("the resumed state indexes %v, want %v", got, want)
	}
}

// resumeAsKeptBy closes eng, the kept engine of the state kept in dir at
// index that the caller changed, marks its state file with an older
// layout, as a build of that layout would have written it, and resumes it
// in a new FSM.
func resumeAsKeptBy(t *testing.T, eng *engine, dir string, index uint64, layout byte) *FSM {
	t.Helper()
	if err := eng.settle(); err != nil {
		t.Fatal(err)
	}
	if err := eng.st.Flush(); err != nil { // the engine keeps no log
		t.Fatal(err)
	}
	eng.release()
	path := filepath.Join(dir, keptDir, keptFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(keptMagic)] = layout
	sum := crc32.New(crcTable)
	sum.Write(b[:len(b)-4])
	binary.BigEndian.PutUint32(b[len(b)-4:], sum.Sum32())
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	g := openIn(t, dir)
	t.Cleanup(g.Close)
	if _, ok, err := g.Resume(func(i, _ uint64) bool { return i == index }); !ok || err != nil {
		t.Fatalf("resume: %v, %v", ok, err)
	}
	return g
}
