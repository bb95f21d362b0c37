package cluster

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// snapshotOnDisk is a node's snapshot store holding one snapshot the FSM
// took of a state with links, and the state's backup (its stream).
func snapshotOnDisk(t *testing.T) (ownerOnlySnapshots, *raft.SnapshotMeta, []byte) {
	t.Helper()
	dir := t.TempDir()
	f, err := fsm.Open(fsm.Config{Dir: filepath.Join(dir, "engine")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	logs := []*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: fsm.InitCommand{Key: [32]byte{7}}.Encode()}}
	for i := range 50 {
		cmd := fsm.CreateBatch{Now: 1e12, Items: []fsm.CreateRequest{{CustomCode: "c" + strconv.Itoa(i), URL: "https://example.com/" + strconv.Itoa(i), Workspace: "default"}}}
		logs = append(logs, &raft.Log{Index: uint64(i + 2), Term: 1, Type: raft.LogCommand, Data: cmd.Encode()})
	}
	f.ApplyBatch(logs)
	var want bytes.Buffer
	if err := f.WriteBackup(&want); err != nil {
		t.Fatal(err)
	}
	snaps, _ := persistSnapshot(t, f, dir, uint64(len(logs)), 1)
	list, err := snaps.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("snapshots %v: %v", list, err)
	}
	return snaps, list[0], want.Bytes()
}

// sendSnapshot sends the leader's snapshot to a follower's store as Raft does:
// Open, then the stream into a new sink, a few bytes at a time at first.
func sendSnapshot(t *testing.T, leader ownerOnlySnapshots, meta *raft.SnapshotMeta, follower ownerOnlySnapshots, damage func([]byte)) ([]byte, error) {
	t.Helper()
	sent, rc, err := leader.Open(meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || int64(len(stream)) != sent.Size {
		t.Fatalf("sent %d bytes (%v), said %d", len(stream), err, sent.Size)
	}
	if damage != nil {
		damage(stream)
	}
	sink, err := follower.Create(raft.SnapshotVersionMax, meta.Index, meta.Term, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 1, len(stream)} {
		n = min(n, len(stream))
		if _, err := sink.Write(stream[:n]); err != nil {
			sink.Cancel()
			return stream, err
		}
		stream = stream[n:]
	}
	return stream, sink.Close()
}

// sharedTables reports whether an engine under engines holds a table of
// the snapshot's checkpoint itself (a hard link), not a copy.
func sharedTables(t *testing.T, snapshot, engines string) bool {
	t.Helper()
	tables, _ := filepath.Glob(filepath.Join(snapshot, "engine", "*.sst"))
	if len(tables) == 0 {
		t.Fatal("the snapshot holds no table")
	}
	for _, table := range tables {
		a, err := os.Stat(table)
		if err != nil {
			t.Fatal(err)
		}
		others, _ := filepath.Glob(filepath.Join(engines, "*", filepath.Base(table)))
		for _, other := range others {
			if b, err := os.Stat(other); err == nil && os.SameFile(a, b) {
				return true
			}
		}
	}
	return false
}

// TestSnapshotsGoAsFiles: while every server reads them, a referential
// snapshot goes to a follower as its checkpoint's files; the follower
// keeps them as a reference of its own, and the install's restore
// resumes them: the follower then holds the leader's state, to the byte.
// Otherwise the snapshot goes as the stream, as before; a damaged files
// stream leaves no snapshot.
func TestSnapshotsGoAsFiles(t *testing.T) {
	leader, meta, want := snapshotOnDisk(t)
	for _, c := range []struct {
		name      string
		files     bool
		damage    func([]byte)
		reference bool // what the follower keeps
	}{
		{"every server reads files", true, nil, true},
		{"some server does not", false, nil, false},
		{"a damaged files stream", true, func(b []byte) { b[len(b)/2] ^= 1 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			leader.sendFiles = func() bool { return c.files }
			dir := t.TempDir()
			follower, err := openSnapshots(dir, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			_, err = sendSnapshot(t, leader, meta, follower, c.damage)
			list, _ := follower.List()
			if c.damage != nil {
				if err == nil || len(list) != 0 {
					t.Fatalf("a damaged stream was installed (%v): %v", err, list)
				}
				return
			}
			if err != nil || len(list) != 1 {
				t.Fatalf("install: %v, snapshots %v", err, list)
			}
			if readable, ref := follower.inspect(list[0].ID); !readable || ref.ok != c.reference {
				t.Fatalf("the follower keeps a readable %v, reference %v; want a reference: %v", readable, ref.ok, c.reference)
			}
			g, err := fsm.Open(fsm.Config{Dir: filepath.Join(dir, "engine")})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			machine := &appliedFSM{FSM: g, volume: newLogVolume(0), received: follower.received}
			// The install's restore resumes the files: its Open writes no
			// stream, whatever this node knows of the others' levels.
			follower.sendFiles = func() bool { return false }
			if c.reference {
				follower.sendFiles = func() bool { t.Error("the install's restore opened a stream"); return false }
			}
			_, rc, err := follower.Open(list[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			if err := machine.Restore(rc); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := g.WriteBackup(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) || g.Len() != 50 {
				t.Errorf("the follower's state (%d links) is not the leader's", g.Len())
			}
			if c.reference && !sharedTables(t, follower.path(list[0].ID), filepath.Join(dir, "engine")) {
				t.Error("the follower's engine copied the snapshot's tables instead of linking them")
			}
			if follower.received.take() != "" {
				t.Error("the restore left the received files for the next one")
			}
		})
	}
}

// TestFilesGateWaitsForEveryServer: a leader sends a checkpoint's files
// only while every server, voter or replica, reports a build that reads
// the files this build writes: one of LevelCheckpoints reads the files but
// refuses the state file's layout of LevelOptionIndexes, and gets the stream.
func TestFilesGateWaitsForEveryServer(t *testing.T) {
	t.Parallel()
	running := new(atomic.Pointer[raft.Raft])
	running.Store(new(raft.Raft))
	for _, c := range []struct {
		name    string
		replica int // the level the read replica reports
		files   bool
	}{
		{"every server reads them", fsm.FilesLevel, true},
		{"a replica of the release before", fsm.LevelPositions, false},
		{"a replica before the files", fsm.LevelCheckpoints - 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			reported := map[raft.ServerID]int{"n2": fsm.EntryLevel, "r1": c.replica}
			levels := &entryLevels{self: "n1", dir: t.TempDir(), log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				servers: func() ([]raft.Server, error) {
					return []raft.Server{{ID: "n1"}, {ID: "n2"}, {ID: "r1", Suffrage: raft.Nonvoter}}, nil
				},
				ask: func(_ context.Context, s raft.Server) (int, bool) { return reported[s.ID], true },
			}
			levels.load()
			if got := filesGate(levels, running, context.Background())(); got != c.files {
				t.Errorf("files sent: %v, want %v", got, c.files)
			}
		})
	}
	if filesGate(&entryLevels{}, new(atomic.Pointer[raft.Raft]), context.Background())() {
		t.Error("files sent before Raft runs")
	}
}
