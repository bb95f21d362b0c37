package cluster

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// Spool runs write into a file of its own in the data directory and
// returns the file, positioned at its start, and its size; the caller
// closes it. The file has no name once created, so it takes no space after
// it is closed, a crash included.
//
// Large answers (a backup, an export) go through it rather than through an
// HTTP response buffer: that buffer grows by doubling, and each growth
// copies what it holds in one call the Go runtime cannot preempt, which
// stops the whole process, Raft's heartbeats included, while the collector
// waits for it (DESIGN.md, "No single call over a large body"). The
// answer is then sent from the file with its length known.
func (n *Node) Spool(write func(io.Writer) error) (*os.File, int64, error) {
	return spool(n.cfg.DataDir, write)
}

// spool is Spool into a file of dir.
func spool(dir string, write func(io.Writer) error) (*os.File, int64, error) {
	f, err := os.CreateTemp(dir, "spool-*")
	if err != nil {
		return nil, 0, fmt.Errorf("spool: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("spool: %w", err)
	}
	size, err := spoolInto(f, write)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("spool: %w", err)
	}
	return f, size, nil
}

func spoolInto(f *os.File, write func(io.Writer) error) (int64, error) {
	w := bufio.NewWriterSize(f, 256<<10)
	if err := write(w); err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	_, err = f.Seek(0, io.SeekStart)
	return size, err
}
