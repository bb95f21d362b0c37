package fsm

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// dirSink is a snapshot sink with a directory, as cluster's store has.
type dirSink struct {
	bytes.Buffer
	dir       string
	cancelled bool
}

func (s *dirSink) ID() string    { return "test" }
func (s *dirSink) Cancel() error { s.cancelled = true; return nil }
func (s *dirSink) Close() error  { return nil }
func (s *dirSink) Dir() string   { return s.dir }

// bufferSink is a snapshot sink without a directory.
type bufferSink struct{ *bytes.Buffer }

func (bufferSink) ID() string    { return "plain" }
func (bufferSink) Cancel() error { return nil }
func (bufferSink) Close() error  { return nil }

// TestSnapshotsReferToACheckpoint: a snapshot of a state on disk, taken
// while Apply goes on, refers to a checkpoint of the state it was taken
// of; the stream that checkpoint gives a follower and the state a start
// resumes from it are that state, to the byte. A snapshot never persisted
// leaves no checkpoint behind, and a sink without a directory gets the
// stream itself.
func TestSnapshotsReferToACheckpoint(t *testing.T) {
	dir := t.TempDir()
	f := openIn(t, dir)
	defer f.Close()
	applyAll(t, f, workload()...)
	want := snapshotBytes(t, f)
	at, _ := f.Applied()

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, f, keyWorkload()...) // after the snapshot: not in it
	sink := &dirSink{dir: t.TempDir()}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !IsReference(sink.Bytes()) || sink.Len() > 32 {
		t.Fatalf("a snapshot on disk wrote %d bytes, not a reference", sink.Len())
	}
	if index, _, ok := ReadReference(bytes.NewReader(sink.Bytes())); !ok || index != at {
		t.Fatalf("the reference names index %d (%v), want the checkpoint's %d", index, ok, at)
	}
	for n := range sink.Len() {
		if _, _, ok := ReadReference(bytes.NewReader(sink.Bytes()[:n])); ok {
			t.Fatalf("a reference cut to %d bytes was read", n)
		}
	}
	var stream bytes.Buffer
	if err := WriteReferred(sink.dir, t.TempDir(), &stream); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stream.Bytes(), want) {
		t.Fatal("the referred stream is not the state the snapshot was taken of")
	}
	// Followers may be sent one snapshot at once: each read has its own copy.
	var wg sync.WaitGroup
	streams := make([]bytes.Buffer, 4)
	errs := make([]error, len(streams))
	for i := range streams {
		wg.Go(func() { errs[i] = WriteReferred(sink.dir, t.TempDir(), &streams[i]) })
	}
	wg.Wait()
	for i := range streams {
		if errs[i] != nil || !bytes.Equal(streams[i].Bytes(), want) {
			t.Errorf("read %d of the snapshot side by side with others: %v", i, errs[i])
		}
	}

	g, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.ResumeFrom(sink.dir, at-1, 1); err == nil {
		t.Fatal("resumed a checkpoint past the index its snapshot is labelled with")
	}
	// Raft labels a snapshot with the last entry it handed over or not:
	// barriers and no-ops after the state's last command.
	if err := g.ResumeFrom(sink.dir, at+2, 1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, g), want) {
		t.Error("the state resumed from the checkpoint is not the one the snapshot was taken of")
	}
	if got, _ := g.Applied(); got != at+2 {
		t.Errorf("resumed at %d, want the snapshot's label %d", got, at+2)
	}

	unused, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if err := unused.Persist(&bufferSink{Buffer: &plain}); err != nil {
		t.Fatal(err)
	}
	unused.Release()
	if !HasSnapshotMagic(plain.Bytes()) {
		t.Error("a sink without a directory did not get the stream")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "snapshot-*")); len(left) != 0 {
		t.Errorf("checkpoints left behind: %v", left)
	}
	if _, err := os.Stat(filepath.Join(sink.dir, referredDir, keptFile)); err != nil {
		t.Errorf("the persisted checkpoint lost its state file: %v", err)
	}
}

// TestKeepAfterARestoreWithoutLinks: a state restored from a snapshot that
// holds nothing on disk, then changed only in memory (servers here), is
// kept, snapshotted and resumed like any other: the engine records the
// index of every batch it is handed.
func TestKeepAfterARestoreWithoutLinks(t *testing.T) {
	source := New()
	applyAll(t, source, ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:8080"}.Encode())
	dir := t.TempDir()
	f := openIn(t, dir)
	if err := f.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, source))}); err != nil {
		t.Fatal(err)
	}
	f.ApplyBatch([]*raft.Log{{Index: 9, Term: 2, Type: raft.LogCommand,
		Data: ServerCommand{ID: "n2", HTTPAddr: "10.0.0.2:8080"}.Encode()}})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.(*snapshot).checkpoint == "" {
		t.Error("no checkpoint of a state with nothing on disk")
	}
	snap.Release()
	want := snapshotBytes(t, f)
	g := keepAndResume(t, f, dir)
	if !bytes.Equal(snapshotBytes(t, g), want) {
		t.Error("the resumed state differs from the kept one")
	}
}

// BenchmarkSnapshotOnDisk reports, at 200k imported links on disk, what a
// Raft snapshot costs where Raft calls it (its apply goroutine, which
// applies nothing meanwhile): the view, the memtables' flush, the
// checkpoint and the state file, after one more entry was applied; and a
// start's resume of that checkpoint into a new engine.
func BenchmarkSnapshotOnDisk(b *testing.B) {
	const links = 200_000
	f := onDisk(b)
	defer f.Close()
	loadLinks(b, f, links, imported)
	next := func(i int) []byte {
		return ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:" + strconv.Itoa(1024+i%60000)}.Encode()
	}
	b.Run("checkpoint", func(b *testing.B) {
		for i := range b.N {
			b.StopTimer()
			applyAll(b, f, next(i))
			b.StartTimer()
			snap, err := f.Snapshot()
			if err != nil || snap.(*snapshot).checkpoint == "" {
				b.Fatalf("no checkpoint: %v", err)
			}
			snap.Release()
		}
	})
	snap, err := f.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	sink := &dirSink{dir: b.TempDir()}
	if err := snap.Persist(sink); err != nil {
		b.Fatal(err)
	}
	snap.Release()
	at, _ := f.Applied()
	b.Run("resume", func(b *testing.B) {
		for range b.N {
			g, err := Open(Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			if err := g.ResumeFrom(sink.dir, at, 1); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			g.Close()
			b.StartTimer()
		}
	})
}
