package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
var referenceMagic = []byte("LKREF")

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

// ReferenceLen is how many first bytes IsReference needs.
var ReferenceLen = len(referenceMagic)

// checkpoint takes the engine's checkpoint and the state file into a new
// directory of cfg.Dir, at the state's index; "" when the state is in
// memory or its index is unknown (a restore applied nothing since), and
// the snapshot is then a copy, as before.
func (f *FSM) checkpoint() (string, error) {
	index := f.applied.Load()
	if f.engines.cfg.Dir == "" || index == 0 {
		return "", nil
	}
	f.engines.checkpoints++
	dir := filepath.Join(f.engines.cfg.Dir, "snapshot-"+strconv.Itoa(f.engines.checkpoints))
	if err := f.writeCheckpoint(dir, index); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	return dir, nil
}

func (f *FSM) writeCheckpoint(dir string, index uint64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	e := f.s.eng
	if err := e.settle(); err != nil {
		return err
	}
	engineDir := filepath.Join(dir, referredDir)
	at, err := e.st.Checkpoint(engineDir)
	if err != nil {
		return err
	}
	if at != index {
		return fmt.Errorf("the engine is at index %d, the state at %d", at, index)
	}
	return writeKeptFile(filepath.Join(engineDir, keptFile), f.s, index, f.appliedTerm)
}

// moveCheckpoint moves the checkpoint into the sink's directory. It fails
// when the two are on different file systems (a data dir split by hand):
// the snapshot is then a copy.
func (snap *snapshot) moveCheckpoint(sink DirSink) bool {
	return os.Rename(filepath.Join(snap.checkpoint, referredDir), filepath.Join(sink.Dir(), referredDir)) == nil
}

// writeReference writes the reference: the index and term the
// checkpoint holds.
func (snap *snapshot) writeReference(sink raft.SnapshotSink) error {
	e := encoder{}
	e.fixed(referenceMagic)
	e.byte(referenceVersion)
	e.uvarint(snap.index)
	e.uvarint(snap.term)
	_, err := sink.Write(e.buf)
	return err
}

// WriteReferred writes the snapshot stream of the state a referential
// snapshot holds: dir is the snapshot's directory. It opens the
// checkpoint to read it only, and holds what the state keeps in memory
// (its link tables) while it writes.
func WriteReferred(dir string, w io.Writer) error {
	engineDir := filepath.Join(dir, referredDir)
	eng := &engine{dir: engineDir, optionCache: inMemoryCacheSlots, recordCache: inMemoryCacheSlots}
	eng.openStore = func() (*store.Store, error) {
		return store.Open(engineDir, store.Options{ReadOnly: true, NoLog: true, BlockCacheBytes: inMemoryCache})
	}
	eng.refs.Store(1)
	defer eng.release()
	s, err := readKeptFile(filepath.Join(engineDir, keptFile), eng)
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

// ResumeFrom takes the state a referential snapshot holds (dir is the
// snapshot's directory) if accept takes its log position, as Resume
// takes a kept one: a start after a
// crash, which kept nothing, begins at its latest snapshot without
// reading the stream. The checkpoint's files are linked into a new
// engine of the FSM's, not changed. Call it once, before Raft starts.
func (f *FSM) ResumeFrom(dir string, accept func(index, term uint64) bool) (uint64, error) {
	if f.engines.cfg.Dir == "" {
		return 0, errors.New("resume: the state is in memory")
	}
	eng := f.engines.open()
	if err := store.CloneCheckpoint(filepath.Join(dir, referredDir), eng.dir); err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	path := filepath.Join(eng.dir, keptFile)
	index, term, err := readKeptPosition(path)
	if err == nil && !accept(index, term) {
		err = fmt.Errorf("the checkpoint is at index %d, term %d: not the snapshot's entry", index, term)
	}
	if err != nil {
		os.RemoveAll(eng.dir)
		return 0, fmt.Errorf("resume: %w", err)
	}
	s, err := readKept(eng, index)
	if err != nil {
		return 0, fmt.Errorf("resume: %w", err)
	}
	f.install(s, index, term)
	return index, nil
}
