package fsm

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestCheckpointFilesInstall: a referential snapshot sent as its
// checkpoint's files, received into another directory and restored into a
// running FSM, is the state the snapshot was taken of, to the byte; the
// stream is as long as it said. A stream damaged anywhere, cut short or
// naming a file outside its directory is refused.
func TestCheckpointFilesInstall(t *testing.T) {
	f, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	applyAll(t, f, workload()...)
	want := snapshotBytes(t, f)
	at, _ := f.Applied()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &dirSink{dir: t.TempDir()}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	files, err := OpenCheckpoint(sink.dir)
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	n, err := files.WriteTo(&stream)
	files.Close()
	if err != nil || n != files.Size() || int64(stream.Len()) != files.Size() {
		t.Fatalf("wrote %d bytes (%v), %d in the buffer, said %d", n, err, stream.Len(), files.Size())
	}
	if !IsCheckpointStream(stream.Bytes()[:CheckpointMagicLen]) {
		t.Fatal("the files stream does not say what it is")
	}

	received := t.TempDir()
	index, _, err := ReceiveCheckpoint(bytes.NewReader(stream.Bytes()), received)
	if err != nil || index != at {
		t.Fatalf("received at index %d (%v), want %d", index, err, at)
	}
	g, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	applyAll(t, g, keyWorkload()...) // a state the install replaces
	if err := g.RestoreFrom(received); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, g), want) {
		t.Error("the state installed from the files is not the one the snapshot was taken of")
	}
	if _, err := os.Stat(filepath.Join(received, referredDir, keptFile)); err != nil {
		t.Errorf("the install changed the received checkpoint: %v", err)
	}
	// The stream itself restores too, where no sink kept it.
	h, err := Open(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Restore(io.NopCloser(bytes.NewReader(stream.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, h), want) {
		t.Error("the state restored from the files stream is not the one the snapshot was taken of")
	}
	if left, _ := filepath.Glob(filepath.Join(h.engines.cfg.Dir, "received-*")); len(left) != 0 {
		t.Errorf("the restore left %v", left)
	}
	if err := New().Restore(io.NopCloser(bytes.NewReader(stream.Bytes()))); err == nil {
		t.Error("a state in memory restored a checkpoint's files")
	}

	nameAt := bytes.Index(stream.Bytes(), []byte(keptFile))
	for name, damage := range map[string]func([]byte) []byte{
		// The checksum fails too, but a name is refused before its bytes.
		"a byte flipped":  func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
		"cut short":       func(b []byte) []byte { return b[:len(b)-100] },
		"the sum cut off": func(b []byte) []byte { return b[:len(b)-4] },
		"a name with a directory": func(b []byte) []byte {
			return bytes.Replace(b, []byte(keptFile), []byte("../a/linkstate"), 1)
		},
		"another stream": func(b []byte) []byte { return snapshotBytes(t, f) },
	} {
		t.Run(name, func(t *testing.T) {
			if nameAt < 0 {
				t.Fatal("no state file in the stream")
			}
			b := damage(bytes.Clone(stream.Bytes()))
			into := t.TempDir()
			if _, _, err := ReceiveCheckpoint(bytes.NewReader(b), into); err == nil {
				t.Fatal("a damaged files stream was received")
			}
			if _, err := os.Stat(filepath.Join(into, "a")); err == nil {
				t.Error("a file was written outside the checkpoint's directory")
			}
		})
	}
}
