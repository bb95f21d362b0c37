package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// The data directory is the operator's alone: it holds every link, the
// keys' hashes, webhook secrets and the cluster key. Directories are 0700
// and files 0600, an existing directory is tightened at start, and each
// snapshot as Raft finishes it (its store makes them 0755 and 0644).

// ownerOnlyDir creates dir, or tightens it and everything in it, to its
// owner alone. A data dir that another user (but root) owns is refused:
// that user could change the node's state or its keys. A path this
// process may not tighten is refused when others may use it, and logged
// when only its group may: a volume's mount point that the platform owns
// and shares with the process's group, as Kubernetes' fsGroup does.
func ownerOnlyDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := ownedHere(dir); err != nil {
		return err
	}
	left, err := ownerOnly(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	for _, p := range left {
		if p.mode&0o007 != 0 {
			return fmt.Errorf("data dir %s: %s is open to others (mode %04o) and this process may not change that: "+
				"make it the linkraft user's alone (chown -R <user> %s; chmod -R go-rwx %s)", dir, p.path, p.mode, dir, dir)
		}
		log.Warn("the group may use this path in the data dir, and this process may not change that: "+
			"make it the linkraft user's alone", "path", p.path, "mode", fmt.Sprintf("%04o", p.mode))
	}
	return nil
}

// openPath is a path others than its owner may use.
type openPath struct {
	path string
	mode fs.FileMode
}

// ownerOnly takes every permission but the owner's from path and what is
// below it, and returns the paths it was not allowed to change.
func ownerOnly(path string) (left []openPath, err error) {
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode().Perm()
		if mode&0o077 == 0 {
			return nil
		}
		if err := os.Chmod(p, mode&0o700); errors.Is(err, fs.ErrPermission) {
			left = append(left, openPath{p, mode})
		} else if err != nil {
			return err
		}
		return nil
	})
	return left, err
}

// ownerOnlySnapshots is a snapshot store whose finished snapshots are
// their owner's alone. A snapshot the FSM took here, or one a leader sent
// as its checkpoint's files (snapfiles.go), is a reference to a checkpoint
// in its directory (fsm/snapref.go); Open hands out what it refers to.
type ownerOnlySnapshots struct {
	*raft.FileSnapshotStore
	dir string // the store's snapshots directory
	// sendFiles reports whether every server reads a snapshot sent as its
	// checkpoint's files (nil: none does); received is the last one a
	// leader sent so, for the restore that follows.
	sendFiles func() bool
	received  *receivedFiles
}

// Open returns the snapshot's stream: the file's as it is, or for a
// reference the checkpoint's files when every server reads them, else the
// snapshot stream of the state it holds, written into a nameless file of
// the data dir so that its size is known (Raft sends it with a
// follower's install).
func (s ownerOnlySnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	head := bufio.NewReader(rc)
	first, _ := head.Peek(fsm.ReferenceLen)
	if !fsm.IsReference(first) {
		return meta, struct {
			io.Reader
			io.Closer
		}{head, rc}, nil
	}
	rc.Close()
	if s.received.holds(s.path(id)) {
		// The install's restore, which resumes the files it received
		// (appliedFSM.Restore) and reads nothing.
		return meta, io.NopCloser(strings.NewReader("")), nil
	}
	if s.sendFiles != nil && s.sendFiles() {
		if files, err := fsm.OpenCheckpoint(s.path(id)); err == nil {
			meta.Size = files.Size()
			return meta, checkpointStream(files), nil
		}
	}
	file, size, err := spool(filepath.Dir(s.dir), func(w io.Writer) error {
		return fsm.WriteReferred(s.path(id), filepath.Dir(s.dir), w)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("open snapshot %s: %w", id, err)
	}
	meta.Size = size
	return meta, file, nil
}

// path is the directory of the snapshot id.
func (s ownerOnlySnapshots) path(id string) string { return filepath.Join(s.dir, id) }

// inspect reads the snapshot's file back with its checksum (the store's
// Open reads it whole) and reports whether it is whole and, for a
// reference, where the checkpoint it refers to stands.
func (s ownerOnlySnapshots) inspect(id string) (readable bool, ref checkpointAt) {
	_, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil {
		return false, ref
	}
	defer rc.Close()
	ref.index, ref.term, ref.ok = fsm.ReadReference(rc)
	return true, ref
}

// checkpointAt is the index and term of a referential snapshot's
// checkpoint, which may be below the snapshot's label (entries the FSM is
// not handed); ok is false for a snapshot stream.
type checkpointAt struct {
	index, term uint64
	ok          bool
}

func (s ownerOnlySnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	s.received.take()
	return &ownerOnlySink{SnapshotSink: sink, path: s.path(sink.ID()), index: index, received: s.received}, nil
}

// ownerOnlySink tightens its snapshot once the store has put it in place.
// A leader's checkpoint files written to it become a checkpoint in its
// directory and a reference to it (snapfiles.go).
type ownerOnlySink struct {
	raft.SnapshotSink
	path     string
	index    uint64 // the snapshot's label
	received *receivedFiles
	head     []byte // the first bytes, until there are enough to tell the files from a stream
	decided  bool
	files    *filesReceiver
}

// Dir is the snapshot's directory while it is written (the file store
// renames it into place at Close): the FSM puts its checkpoint there.
func (s *ownerOnlySink) Dir() string { return s.path + ".tmp" }

func (s *ownerOnlySink) Close() error {
	if err := s.closeFiles(); err != nil {
		s.SnapshotSink.Cancel()
		return err
	}
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	if _, err := ownerOnly(s.path); err != nil {
		return fmt.Errorf("snapshot %s: %w", s.path, err)
	}
	if s.files != nil {
		s.received.put(s.path)
	}
	return nil
}

func (s *ownerOnlySink) Cancel() error {
	if s.files != nil {
		s.files.cancel()
	}
	return s.SnapshotSink.Cancel()
}
