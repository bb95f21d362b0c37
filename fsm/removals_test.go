package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"strings"
	"testing"
)

var raiseRemovals = RaiseCommand{To: LevelRemovals}.Encode()

// TestRemovalRecords: what each removal entry leaves in the registry, as a
// leader that reads it before adding a server, and a view that lists the
// servers' HTTP addresses, see it.
func TestRemovalRecords(t *testing.T) {
	addr := ServerCommand{ID: "n4", HTTPAddr: "10.0.0.4:8080"}.Encode()
	cases := []struct {
		name    string
		entries [][]byte
		refused bool // the last entry is refused
		removed bool
		inc     string
		addr    bool // n4's HTTP address is still listed
	}{
		{name: "below the level: refused, nothing changes",
			entries: [][]byte{raiseVisitRows, addr, ServerRemovalCommand{ID: "n4", Incarnation: "aa"}.Encode()},
			refused: true, addr: true},
		{name: "removed with its incarnation, its address forgotten",
			entries: [][]byte{raiseRemovals, addr, ServerRemovalCommand{ID: "n4", Incarnation: "aa"}.Encode()},
			removed: true, inc: "aa"},
		{name: "removed with no incarnation known",
			entries: [][]byte{raiseRemovals, addr, ServerRemovalCommand{ID: "n4"}.Encode()},
			removed: true},
		{name: "removed again with another incarnation",
			entries: [][]byte{raiseRemovals, ServerRemovalCommand{ID: "n4", Incarnation: "aa"}.Encode(), ServerRemovalCommand{ID: "n4", Incarnation: "bb"}.Encode()},
			removed: true, inc: "bb"},
		{name: "forgotten by a join of a new data dir",
			entries: [][]byte{raiseRemovals, ServerRemovalCommand{ID: "n4", Incarnation: "aa"}.Encode(), ServerRemovalCommand{ID: "n4", Forget: true}.Encode(), addr},
			addr:    true},
		{name: "no id",
			entries: [][]byte{raiseRemovals, addr, ServerRemovalCommand{Incarnation: "aa"}.Encode()},
			refused: true, addr: true},
		{name: "an id no server has",
			entries: [][]byte{raiseRemovals, addr, ServerRemovalCommand{ID: strings.Repeat("n", maxServerField+1)}.Encode()},
			refused: true, addr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := New()
			results := applyAll(t, f, append([][]byte{InitCommand{Key: testKey}.Encode()}, c.entries...)...)
			err, _ := results[len(results)-1].(error)
			if refused := errors.Is(err, ErrInvalidRequest); refused != c.refused || err != nil && !refused {
				t.Fatalf("last entry: %v, want refused %v", err, c.refused)
			}
			inc, removed := f.Removed("n4")
			if removed != c.removed || inc != c.inc {
				t.Errorf("Removed(n4) = %q, %v; want %q, %v", inc, removed, c.inc, c.removed)
			}
			if _, ok := f.ServerHTTP("n4"); ok != c.addr {
				t.Errorf("n4's HTTP address listed: %v, want %v", ok, c.addr)
			}
		})
	}
}

// TestRemovalRecordsSurviveSnapshots: a state raised to LevelRemovals is
// written in version 11 with its records, and restores to the same bytes
// and the same answers.
func TestRemovalRecordsSurviveSnapshots(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseRemovals,
		ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:8080"}.Encode(),
		ServerRemovalCommand{ID: "n5", Incarnation: "0123456789abcdef"}.Encode(),
		ServerRemovalCommand{ID: "n4"}.Encode())
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV11 {
		t.Fatalf("version %d, want %d", v, snapshotV11)
	}
	g := roundTrip(t, f)
	for id, want := range map[string]string{"n4": "", "n5": "0123456789abcdef"} {
		if inc, ok := g.Removed(id); !ok || inc != want {
			t.Errorf("restored Removed(%s) = %q, %v; want %q", id, inc, ok, want)
		}
	}
	if _, ok := g.Removed("n1"); ok {
		t.Error("restored state says n1 was removed")
	}
	if addr, _ := g.ServerHTTP("n1"); addr != "10.0.0.1:8080" {
		t.Errorf("restored n1 at %q", addr)
	}
}

// TestSnapshotV10StillRestores: a snapshot written by the last build before
// removal records (testdata/snapshot-v10.bin: raised to LevelVisitRows, two
// servers registered, one forgotten, one link) restores, writes back the
// same bytes, and takes removal records once the cluster is raised.
func TestSnapshotV10StillRestores(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-v10.bin")
	if err != nil {
		t.Fatal(err)
	}
	f := New()
	if err := f.Restore(nopCloser{bytes.NewReader(old)}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if !bytes.Equal(snapshotBytes(t, f), old) {
		t.Error("the restored state writes other bytes than the older build did")
	}
	for id, want := range map[string]string{"n1": "10.0.0.1:8080", "n2": "10.0.0.2:8080"} {
		if addr, ok := f.ServerHTTP(id); !ok || addr != want {
			t.Errorf("%s at %q, want %q", id, addr, want)
		}
	}
	if _, ok := f.ServerHTTP("n3"); ok {
		t.Error("n3, forgotten before the snapshot, is listed")
	}
	if _, ok := f.Get("v10"); !ok {
		t.Error("the link is gone")
	}
	if f.Raised() != LevelVisitRows {
		t.Fatalf("raised to %d, want %d", f.Raised(), LevelVisitRows)
	}
	results := applyAll(t, f, ServerRemovalCommand{ID: "n2"}.Encode())
	if err, _ := results[0].(error); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a removal before the raise: %v, want refused", err)
	}
	applyAll(t, f, raiseRemovals, ServerRemovalCommand{ID: "n2", Incarnation: "aa"}.Encode())
	g := roundTrip(t, f)
	if inc, ok := g.Removed("n2"); !ok || inc != "aa" {
		t.Errorf("after the raise, Removed(n2) = %q, %v", inc, ok)
	}
	if _, ok := g.ServerHTTP("n2"); ok {
		t.Error("the removed n2's HTTP address is still listed")
	}
}

// TestSnapshotRefusesBadRemovalRecords: records out of order (which no
// build writes) make the snapshot fail as a whole.
func TestSnapshotRefusesBadRemovalRecords(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseRemovals,
		ServerRemovalCommand{ID: "srv-a", Incarnation: "inc-1"}.Encode(),
		ServerRemovalCommand{ID: "srv-b", Incarnation: "inc-2"}.Encode())
	good := snapshotBytes(t, f)
	a, b := bytes.Index(good, []byte("srv-a")), bytes.Index(good, []byte("srv-b"))
	if a < 0 || b < 0 {
		t.Fatal("records not found in the snapshot")
	}
	bad := bytes.Clone(good)
	bad[a+len("srv-")], bad[b+len("srv-")] = 'b', 'a'
	binary.BigEndian.PutUint32(bad[len(bad)-4:], crc32.Checksum(bad[:len(bad)-4], crcTable))
	if err := New().Restore(nopCloser{bytes.NewReader(bad)}); err == nil {
		t.Fatal("a snapshot with removal records out of order restored")
	}
}

// TestRestoreKeepsTheClusterRemovals: a backup restored into a cluster
// keeps the servers the cluster removed, whatever the backup says (it may
// predate the removal, and list the server's HTTP address).
func TestRestoreKeepsTheClusterRemovals(t *testing.T) {
	backup := New()
	applyAll(t, backup, InitCommand{Key: testKey}.Encode(), raiseVisitRows,
		ServerCommand{ID: "n4", HTTPAddr: "10.0.0.4:8080"}.Encode())
	cur := New()
	applyAll(t, cur, InitCommand{Key: testKey}.Encode(), raiseRemovals,
		ServerRemovalCommand{ID: "n4", Incarnation: "aa"}.Encode())
	g := restored(t, mergedBackup(t, cur, snapshotBytes(t, backup)))
	if inc, ok := g.Removed("n4"); !ok || inc != "aa" {
		t.Errorf("after the restore Removed(n4) = %q, %v; want the cluster's record", inc, ok)
	}
	if _, ok := g.ServerHTTP("n4"); ok {
		t.Error("after the restore the removed n4's HTTP address is listed again")
	}
}
