package fsm

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
	f, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, workload()...)
	want := snapshotBytes(t, f)

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
	var stream bytes.Buffer
	if err := WriteReferred(sink.dir, &stream); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stream.Bytes(), want) {
		t.Fatal("the referred stream is not the state the snapshot was taken of")
	}

	g, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	index, _ := f.Applied()
	if _, err := g.ResumeFrom(sink.dir, func(uint64, uint64) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, g), want) {
		t.Error("the state resumed from the checkpoint is not the one the snapshot was taken of")
	}
	if at, _ := g.Applied(); at >= index {
		t.Errorf("resumed at %d, which is not before the later writes (%d)", at, index)
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
