package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// keptAt leaves in dir a state kept at the given index and term, as a
// node's clean stop does.
func keptAt(t *testing.T, dir string, index, term uint64) {
	t.Helper()
	f, err := fsm.Open(fsm.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	logs := make([]*raft.Log, index)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i) + 1, Term: term, Type: raft.LogCommand,
			Data: fsm.ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:" + strconv.Itoa(i+1)}.Encode()}
	}
	f.ApplyBatch(logs)
	if got, err := f.Keep(); err != nil || got != index {
		t.Fatalf("keep: index %d, want %d: %v", got, index, err)
	}
}

// TestResumeNeedsTheKeptEntry: a start resumes the kept state only when
// this node's Raft state holds the entry it was kept at, and its latest
// snapshot reads back whole; otherwise it rebuilds (Raft restores).
func TestResumeNeedsTheKeptEntry(t *testing.T) {
	const index, term = 5, 2
	type snap struct {
		index, term uint64
		damaged     bool
	}
	for _, c := range []struct {
		name    string
		logTerm uint64 // the term of the log's entry at index; 0: no entry
		snap    *snap
		want    bool
	}{
		{"the log holds it", term, nil, true},
		{"the log holds another term there", term + 1, nil, false},
		{"nothing holds it (raft.db removed)", 0, nil, false},
		{"the latest snapshot is it", 0, &snap{index, term, false}, true},
		{"the latest snapshot is another term's", 0, &snap{index, term + 1, false}, false},
		{"the latest snapshot is past it", term, &snap{index + 3, term, false}, false},
		{"a snapshot before it, the log holds it", term, &snap{index - 2, term, false}, true},
		{"the latest snapshot is damaged", term, &snap{index - 2, term, true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			engine := filepath.Join(dir, "engine")
			keptAt(t, engine, index, term)
			logs := raft.NewInmemStore()
			if c.logTerm != 0 {
				for i := uint64(1); i <= index; i++ {
					if err := logs.StoreLog(&raft.Log{Index: i, Term: c.logTerm, Type: raft.LogNoop}); err != nil {
						t.Fatal(err)
					}
				}
			}
			snaps, err := openSnapshots(dir, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			if c.snap != nil {
				sink, err := snaps.Create(raft.SnapshotVersionMax, c.snap.index, c.snap.term, raft.Configuration{}, 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				sink.Write([]byte("a snapshot's bytes"))
				if err := sink.Close(); err != nil {
					t.Fatal(err)
				}
				if c.snap.damaged {
					damage(t, filepath.Join(dir, "snapshots", sink.ID(), "state.bin"))
				}
			}
			f, err := fsm.Open(fsm.Config{Dir: engine})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := resumeState(&appliedFSM{FSM: f}, snaps, logs, slog.New(slog.NewTextHandler(io.Discard, nil))); got != c.want {
				t.Fatalf("resumed %v, want %v", got, c.want)
			}
			if applied, _ := f.Applied(); c.want && applied != index {
				t.Errorf("resumed at %d, want %d", applied, index)
			}
		})
	}
}

func damage(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// persistSnapshot takes f's snapshot into the snapshot store of dir,
// labelled index and term, as Raft does; it returns the store and the
// snapshot's id.
func persistSnapshot(t *testing.T, f *fsm.FSM, dir string, index, term uint64) (ownerOnlySnapshots, string) {
	t.Helper()
	snaps, err := openSnapshots(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return snaps, sink.ID()
}

// TestResumeFromTheLatestSnapshot: a start that finds nothing kept (after
// a crash) resumes the checkpoint its latest snapshot refers to, when the
// snapshot's entry is the checkpoint's; its stream, as a follower reads
// it, is the state's.
func TestResumeFromTheLatestSnapshot(t *testing.T) {
	for _, c := range []struct {
		name  string
		label uint64 // the index the snapshot is labelled with
		want  bool
	}{
		{"the snapshot's entry", 5, true},
		{"labelled past it (barriers, no-ops)", 7, true},
		{"labelled before it", 4, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			engine := filepath.Join(dir, "engine")
			f, err := fsm.Open(fsm.Config{Dir: engine, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			logs := raft.NewInmemStore()
			for i := uint64(1); i <= 5; i++ {
				l := &raft.Log{Index: i, Term: 2, Type: raft.LogCommand,
					Data: fsm.ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:" + strconv.Itoa(int(i))}.Encode()}
				f.ApplyBatch([]*raft.Log{l})
				if err := logs.StoreLog(l); err != nil {
					t.Fatal(err)
				}
			}
			var want bytes.Buffer
			if err := f.WriteBackup(&want); err != nil {
				t.Fatal(err)
			}
			snaps, id := persistSnapshot(t, f, dir, c.label, 2)
			f.Close() // as a crash leaves it: nothing kept

			_, rc, err := snaps.Open(id)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("the referred snapshot's stream (%d bytes, %v) is not the state's (%d bytes)", len(got), err, want.Len())
			}

			g, err := fsm.Open(fsm.Config{Dir: engine})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if got := resumeState(&appliedFSM{FSM: g}, snaps, logs, slog.New(slog.NewTextHandler(io.Discard, nil))); got != c.want {
				t.Fatalf("resumed %v, want %v", got, c.want)
			}
			if !c.want {
				return
			}
			var resumed bytes.Buffer
			if err := g.WriteBackup(&resumed); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(resumed.Bytes(), want.Bytes()) {
				t.Error("the state resumed from the snapshot differs from the one it was taken of")
			}
		})
	}
}

// TestResumeKeptBelowTheSnapshotsLabel: Raft labels a snapshot with its
// last applied entry, which may be past the FSM's (a no-op or a
// configuration as a leader stops). A state kept at the entry of the
// checkpoint the snapshot refers to is that checkpoint's state, and a
// start resumes it as kept; one kept elsewhere below the label is dropped
// for the checkpoint.
func TestResumeKeptBelowTheSnapshotsLabel(t *testing.T) {
	const kept, label, term = 5, 7, 2
	for _, c := range []struct {
		name       string
		checkpoint uint64 // the FSM's applied index when the snapshot was taken
		keptTerm   uint64 // the term of the entries the kept state applied after it
		want       string
		applied    uint64
	}{
		{"the checkpoint is the kept state", kept, term, resumedKept, kept},
		{"the checkpoint is before the kept state", kept - 1, term, resumedSnapshot, label},
		{"the checkpoint's entry is of another term", kept, term + 1, resumedSnapshot, label},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			engine := filepath.Join(dir, "engine")
			f, err := fsm.Open(fsm.Config{Dir: engine})
			if err != nil {
				t.Fatal(err)
			}
			apply := func(from, to, term uint64) {
				for i := from; i <= to; i++ {
					f.ApplyBatch([]*raft.Log{{Index: i, Term: term, Type: raft.LogCommand,
						Data: fsm.ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:" + strconv.Itoa(int(i))}.Encode()}})
				}
			}
			apply(1, c.checkpoint, term)
			snaps, _ := persistSnapshot(t, f, dir, label, term)
			if c.keptTerm != term {
				// Another log from the start: the state is rebuilt in a
				// new FSM, its entries of another term.
				f.Close()
				if f, err = fsm.Open(fsm.Config{Dir: engine}); err != nil {
					t.Fatal(err)
				}
				apply(1, kept, c.keptTerm)
			} else {
				apply(c.checkpoint+1, kept, term)
			}
			if got, err := f.Keep(); err != nil || got != kept {
				t.Fatalf("keep: index %d, want %d: %v", got, kept, err)
			}
			f.Close()

			g, err := fsm.Open(fsm.Config{Dir: engine})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			var out bytes.Buffer
			// The log before the label is compacted away: only the
			// snapshot names the kept entry.
			m := &appliedFSM{FSM: g}
			if !resumeState(m, snaps, raft.NewInmemStore(), slog.New(slog.NewTextHandler(&out, nil))) {
				t.Fatalf("nothing resumed: %s", out.String())
			}
			if !bytes.Contains(out.Bytes(), []byte(c.want)) {
				t.Errorf("the start logged %q, want %q", out.String(), c.want)
			}
			if applied, _ := g.Applied(); applied != c.applied {
				t.Errorf("resumed at %d, want %d", applied, c.applied)
			}
			// Every entry up to the label is in the state: a leader that
			// reports the label finds this node caught up, not behind
			// until the next write.
			m.noteLeaderIndex(label)
			if got := m.appliedIndex(); got != label || m.behind() {
				t.Errorf("the node reports %d applied (behind: %v), want the label %d", got, m.behind(), label)
			}
		})
	}
}

// TestOpenSnapshotsRemovesLeftovers: what a stop cut short leaves (a
// snapshot never finished, a copy of a checkpoint being read) holds hard
// links to engine files; the next start removes it, and keeps the
// snapshots that were finished.
func TestOpenSnapshotsRemovesLeftovers(t *testing.T) {
	dir := t.TempDir()
	snaps, err := openSnapshots(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, 3, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("a finished snapshot"))
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	left := []string{filepath.Join(dir, "snapshots", "2-9-123.tmp", "engine"), filepath.Join(dir, "referred-42", "engine")}
	for _, p := range left {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if snaps, err = openSnapshots(dir, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", filepath.Dir(p), err)
		}
	}
	if list, err := snaps.List(); err != nil || len(list) != 1 {
		t.Errorf("the finished snapshot: %v, %v", list, err)
	}
}
