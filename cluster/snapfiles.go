package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// A snapshot that refers to a checkpoint goes to a follower as the
// checkpoint's files while every server reads them (fsm.FilesLevel),
// as the snapshot stream otherwise (DESIGN.md, "Storage"). The follower's
// sink writes the files into the snapshot's directory and stores a
// reference to them, as the FSM does with a snapshot of its own, and the
// install's restore resumes them instead of reading a stream.

// filesWait bounds how long a snapshot send waits for the servers' levels
// (entryLevels asks those it has not heard from).
const filesWait = 2 * time.Second

// filesGate reports, once Raft runs, whether every server of the
// configuration reads a snapshot sent as its checkpoint's files.
func filesGate(levels *entryLevels, running *atomic.Pointer[raft.Raft], stopping context.Context) func() bool {
	return func() bool {
		if running.Load() == nil {
			return false
		}
		ctx, cancel := context.WithTimeout(stopping, filesWait)
		defer cancel()
		return levels.require(ctx, fsm.FilesLevel) == nil
	}
}

// checkpointStream is the files stream of a checkpoint, written as it is
// read; Close stops the writer and closes the files.
func checkpointStream(files *fsm.CheckpointFiles) io.ReadCloser {
	r, w := io.Pipe()
	go func() {
		_, err := files.WriteTo(w)
		files.Close()
		w.CloseWithError(err)
	}()
	return r
}

// receivedFiles is the directory of the snapshot a leader last sent as its
// checkpoint's files: Raft restores that snapshot right after its sink
// closes, and the restore resumes the checkpoint there
// (appliedFSM.Restore). A new sink forgets it: a restore that never came
// (Raft stopped, or failed to open the snapshot) must not be taken by the
// next one.
type receivedFiles struct {
	mu  sync.Mutex
	dir string
}

func (r *receivedFiles) put(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dir = dir
}

// holds reports whether dir is the directory put last, not taken yet.
func (r *receivedFiles) holds(dir string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dir == dir
}

// take returns the directory put last, once; "" for none.
func (r *receivedFiles) take() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	dir := r.dir
	r.dir = ""
	return dir
}

// filesReceiver writes a files stream into the sink's directory as the
// sink is written (fsm.ReceiveCheckpoint, on a goroutine of its own).
type filesReceiver struct {
	w    *io.PipeWriter
	done chan filesReceived
}

type filesReceived struct {
	index, term uint64
	err         error
}

func receiveFiles(dir string) *filesReceiver {
	r, w := io.Pipe()
	fr := &filesReceiver{w: w, done: make(chan filesReceived, 1)}
	go func() {
		index, term, err := fsm.ReceiveCheckpoint(r, dir)
		r.CloseWithError(errors.Join(err, errors.New("the checkpoint was received"))) // a write after its end fails
		fr.done <- filesReceived{index, term, err}
	}()
	return fr
}

// finish ends the stream and waits for the files to be written.
func (fr *filesReceiver) finish() (index, term uint64, err error) {
	fr.w.Close()
	got := <-fr.done
	return got.index, got.term, got.err
}

// cancel stops the receiver; what it wrote goes with the sink's directory.
func (fr *filesReceiver) cancel() {
	fr.w.CloseWithError(errors.New("the snapshot was cancelled"))
	<-fr.done
}

// Write passes a snapshot's bytes on: to its file, or, when its first
// bytes open a checkpoint's files, to a receiver that writes them.
func (s *ownerOnlySink) Write(p []byte) (int, error) {
	switch {
	case s.files != nil:
		return s.files.w.Write(p)
	case s.decided:
		return s.SnapshotSink.Write(p)
	}
	s.head = append(s.head, p...)
	if len(s.head) < fsm.CheckpointMagicLen {
		return len(p), nil
	}
	s.decided = true
	if fsm.IsCheckpointStream(s.head[:fsm.CheckpointMagicLen]) {
		s.files = receiveFiles(s.Dir())
		_, err := s.files.w.Write(s.head)
		return len(p), err
	}
	_, err := s.SnapshotSink.Write(s.head)
	return len(p), err
}

// closeFiles finishes what Write began: the files written, a reference to
// them in the snapshot's file; or the first bytes of a stream too short
// to tell.
func (s *ownerOnlySink) closeFiles() error {
	if s.files == nil {
		if s.decided || len(s.head) == 0 {
			return nil
		}
		_, err := s.SnapshotSink.Write(s.head)
		return err
	}
	index, term, err := s.files.finish()
	if err == nil && index > s.index {
		err = fmt.Errorf("the checkpoint is at index %d, past the snapshot's %d", index, s.index)
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", s.ID(), err)
	}
	return fsm.WriteReference(s.SnapshotSink, index, term)
}
