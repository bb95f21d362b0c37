package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/store"
)

// A snapshot of a state on disk refers to what it holds instead of
// copying it: Snapshot takes a checkpoint of the engine (its files
// hard-linked) with the state file a clean stop writes (kept.go), under
// the write lock, so both are the state at the index Raft labels the
// snapshot with. When the sink names a directory (cluster's snapshot
// store), Persist moves the checkpoint there and writes only a reference;
// the store turns it into the snapshot stream when a follower needs it
// (WriteReferred), and a start that finds nothing kept resumes from it
// (ResumeFrom) instead of reading the stream (DESIGN.md, "Snapshots").

// referenceMagic opens a reference; the snapshot stream opens with
// snapshotMagic, so a reader tells them apart by their first bytes.
var referenceMagic = []byte(referenceMagicText)

const referenceMagicText = "LKREF"

const referenceVersion = 1

// referredDir is the checkpoint's directory inside the snapshot's.
const referredDir = "engine"

// DirSink is a snapshot sink whose snapshot is a directory, which
// Persist may put files in: they stay with the snapshot.
type DirSink interface {
	raft.SnapshotSink
	Dir() string
}

// IsReference reports whether a snapshot's first bytes are a reference
// to a checkpoint beside it rather than the snapshot stream.
func IsReference(head []byte) bool { return bytes.HasPrefix(head, referenceMagic) }

// ReadReference reads the index and term of the checkpoint a reference
// refers to; ok is false when r holds something else (a snapshot stream).
func ReadReference(r io.Reader) (index, term uint64, ok bool) {
	head, err := io.ReadAll(io.LimitReader(r, int64(referenceMaxLen)))
	if err != nil || !IsReference(head) {
		return 0, 0, false
	}
	d := &decoder{buf: head[len(referenceMagic):]}
	if d.byte() != referenceVersion {
		return 0, 0, false
	}
	index, term = d.uvarint(), d.uvarint()
	return index, term, d.err == nil
}

// referenceMaxLen bounds a reference: its magic, version and two uvarints.
const referenceMaxLen = len(referenceMagicText) + 1 + 2*binary.MaxVarintLen64

// ReferenceLen is how many first bytes IsReference needs.
const ReferenceLen = len(referenceMagicText)

// checkpoint takes the engine's checkpoint and the state file of snap
// into a new directory of cfg.Dir, at the state's index; "" when the
// state is in memory or its index is unknown (a restore applied nothing
// since), and the snapshot is then a copy, as before.
func (f *FSM) checkpoint(snap *snapshot) (string, error) {
	if f.engines.cfg.Dir == "" || snap.index == 0 {
		return "", nil
	}
	f.engines.checkpoints++
	dir := filepath.Join(f.engines.cfg.Dir, "snapshot-"+strconv.Itoa(f.engines.checkpoints))
	if err := f.writeCheckpoint(dir, snap); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	return dir, nil
}

func (f *FSM) writeCheckpoint(dir string, snap *snapshot) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	engineDir := filepath.Join(dir, referredDir)
	at, err := f.s.eng.st.Checkpoint(engineDir)
	if err != nil {
		return err
	}
	if at != snap.index {
		return fmt.Errorf("the engine is at index %d, the state at %d", at, snap.index)
	}
	if err := writeKeptFile(filepath.Join(engineDir, keptFile), f.s, snap); err != nil {
		return err
	}
	return store.SyncDir(engineDir)
}

// moveCheckpoint moves the checkpoint into the sink's directory. It fails
// when the two are on different file systems (a data dir split by hand):
// the snapshot is then a copy.
func (snap *snapshot) moveCheckpoint(sink DirSink) bool {
	to := filepath.Join(sink.Dir(), referredDir)
	if os.Rename(filepath.Join(snap.checkpoint, referredDir), to) != nil {
		return false
	}
	return store.SyncDir(sink.Dir()) == nil && store.SyncDir(snap.checkpoint) == nil
}

// WriteReference writes a reference to the checkpoint beside it, at the
// index and term the checkpoint holds (the snapshot's label may be
// further on, past entries the FSM is not handed: barriers, no-ops).
func WriteReference(w io.Writer, index, term uint64) error {
	e := encoder{}
	e.fixed(referenceMagic)
	e.byte(referenceVersion)
	e.uvarint(index)
	e.uvarint(term)
	_, err := w.Write(e.buf)
	return err
}

// WriteReferred writes the snapshot stream of the state a referential
// snapshot holds: dir is the snapshot's directory, scratch a directory of
// the same file system where it links a private copy of the checkpoint
// (so that reads of one snapshot run side by side, and Raft may remove the
// snapshot meanwhile). It holds what the state keeps in memory (its link
// tables) while it writes. A damaged checkpoint is an error, not a crash.
func WriteReferred(dir, scratch string, w io.Writer) (err error) {
	tmp, err := os.MkdirTemp(scratch, "referred-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	engineDir := filepath.Join(tmp, referredDir)
	if err := store.CloneCheckpoint(filepath.Join(dir, referredDir), engineDir); err != nil {
		return err
	}
	eng := newEngine(engineDir, store.Options{ReadOnly: true, NoLog: true, BlockCacheBytes: inMemoryCache},
		inMemoryCacheSlots, inMemoryCacheSlots)
	defer eng.release()
	defer recoverRead(&err)
	s, _, err := readKeptFile(filepath.Join(engineDir, keptFile), eng)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", dir, err)
	}
	eng.published = true
	snap, err := s.snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	return snap.writeTo(w)
}

// recoverRead turns the panic of a failed engine read (engine.read) into
// the function's error: outside Apply, a damaged file must not stop the
// node.
func recoverRead(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("the engine failed a read: %v", r)
	}
}

// ResumeFrom takes the state a referential snapshot holds (dir is the
// snapshot's directory, labelled index and term by Raft), as Resume takes
// a kept one: a start after a crash, which kept nothing, begins at its
// latest snapshot without reading the stream. The checkpoint's files are
// linked into a new engine of the FSM's, not changed. Its own index may be
// below the label, never above: Raft counts entries it does not hand the
// FSM. Call it once, before Raft starts.
func (f *FSM) ResumeFrom(dir string, index, term uint64) error {
	s, err := f.referred(dir, index)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	f.install(s, index, term)
	f.fillIndexes(s)
	return nil
}

// RestoreFrom replaces the state with the one a referential snapshot
// holds, as Restore does with a stream: Raft's install of a snapshot a
// leader sent as its checkpoint's files (ReceiveCheckpoint wrote them
// into dir).
func (f *FSM) RestoreFrom(dir string) error {
	s, err := f.referred(dir, math.MaxUint64)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f.replace(s)
	f.fillIndexes(s)
	return nil
}

// referred builds the state of the checkpoint in dir, which must not be
// past index, in a new engine of the FSM's.
func (f *FSM) referred(dir string, index uint64) (*state, error) {
	if f.engines.cfg.Dir == "" {
		return nil, errors.New("the state is in memory")
	}
	eng := f.engines.open()
	if err := store.CloneCheckpoint(filepath.Join(dir, referredDir), eng.dir); err != nil {
		os.RemoveAll(eng.dir)
		return nil, err
	}
	at, _, err := readKeptPosition(filepath.Join(eng.dir, keptFile))
	if err == nil && at > index {
		err = fmt.Errorf("the checkpoint is at index %d, past the snapshot's %d", at, index)
	}
	if err != nil {
		os.RemoveAll(eng.dir)
		return nil, err
	}
	return readKept(eng, at)
}
