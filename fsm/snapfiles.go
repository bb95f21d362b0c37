package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/linkraft/linkraft/fsm/store"
)

// A snapshot that refers to a checkpoint (snapref.go) can go to a follower
// as the checkpoint's files: the follower writes them and resumes them, as
// a start resumes a checkpoint, instead of rebuilding its engine from the
// snapshot stream, which costs a decode and a write of every key. Only
// builds of FilesLevel read what this build sends (LevelCheckpoints read
// the files, LevelOptionIndexes their layout); the cluster sends it only
// while every server does, the stream otherwise. The files stream is
//
//	magic, version, index, term (of the checkpoint's state), file count;
//	per file: its name, its size, its bytes;
//	CRC-32C of every byte before it, big-endian.
//
// A checkpoint is one flat directory, so a name is a plain file name.
// Sizes come before bytes, so the stream's length is known before its
// first byte is sent (Raft sends it with the install request).

var checkpointMagic = []byte("LKCP")

const checkpointStreamVersion = 1

// CheckpointMagicLen is how many first bytes IsCheckpointStream needs.
const CheckpointMagicLen = 4

// maxCheckpointFiles bounds the files a stream may name: a checkpoint of a
// billion links holds a few thousand.
const maxCheckpointFiles = 1 << 20

// IsCheckpointStream reports whether a snapshot's first bytes open the
// files of a checkpoint rather than the snapshot stream.
func IsCheckpointStream(head []byte) bool { return string(head) == string(checkpointMagic) }

// CheckpointFiles is the checkpoint of a referential snapshot with every
// file held open, so that Raft may remove the snapshot while it is sent.
type CheckpointFiles struct {
	head  []byte
	files []checkpointFile
	size  int64
}

type checkpointFile struct {
	name string
	file *os.File
	size int64
}

// OpenCheckpoint opens the checkpoint a referential snapshot's directory
// holds, to be sent as its files.
func OpenCheckpoint(dir string) (c *CheckpointFiles, err error) {
	engineDir := filepath.Join(dir, referredDir)
	index, term, err := readKeptPosition(filepath.Join(engineDir, keptFile))
	if err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w", dir, err)
	}
	entries, err := os.ReadDir(engineDir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoint %s: %w", dir, err)
	}
	c = &CheckpointFiles{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for _, entry := range entries {
		if !entry.Type().IsRegular() {
			return nil, fmt.Errorf("open checkpoint %s: %s is not a file", dir, entry.Name())
		}
		file, err := os.Open(filepath.Join(engineDir, entry.Name()))
		if err != nil {
			return nil, fmt.Errorf("open checkpoint %s: %w", dir, err)
		}
		c.files = append(c.files, checkpointFile{name: entry.Name(), file: file})
		info, err := file.Stat()
		if err != nil {
			return nil, fmt.Errorf("open checkpoint %s: %w", dir, err)
		}
		c.files[len(c.files)-1].size = info.Size()
	}
	e := encoder{}
	e.fixed(checkpointMagic)
	e.byte(checkpointStreamVersion)
	e.uvarint(index)
	e.uvarint(term)
	e.uvarint(uint64(len(c.files)))
	c.head = e.buf
	c.size = int64(len(c.head)) + crc32.Size
	for _, f := range c.files {
		c.size += int64(len(f.header())) + f.size
	}
	return c, nil
}

// header is what precedes the file's bytes in the stream.
func (f *checkpointFile) header() []byte {
	e := encoder{}
	e.string(f.name)
	e.uvarint(uint64(f.size))
	return e.buf
}

// Size is the length of the stream WriteTo writes.
func (c *CheckpointFiles) Size() int64 { return c.size }

// WriteTo writes the files stream. A file shorter than when it was
// opened is an error: the stream's length was promised.
func (c *CheckpointFiles) WriteTo(w io.Writer) (int64, error) {
	crc := crc32.New(crcTable)
	out := &countingWriter{w: io.MultiWriter(w, crc)}
	if _, err := out.Write(c.head); err != nil {
		return out.n, err
	}
	for _, f := range c.files {
		if _, err := out.Write(f.header()); err != nil {
			return out.n, err
		}
		if _, err := io.CopyN(out, f.file, f.size); err != nil {
			return out.n, fmt.Errorf("checkpoint file %s: %w", f.name, err)
		}
	}
	n, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return out.n + int64(n), err
}

// Close closes the files.
func (c *CheckpointFiles) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.file.Close())
	}
	return errors.Join(errs...)
}

// ReceiveCheckpoint writes the checkpoint a files stream holds into dir
// (the snapshot's directory, as a referential snapshot keeps it), each
// file and the directory synced, and returns the index and term of its
// state. It reads the stream to its end and checks its checksum, so a
// stream cut short or damaged is an error; what it wrote then is the
// caller's to remove with dir.
func ReceiveCheckpoint(r io.Reader, dir string) (index, term uint64, err error) {
	d := newStreamDecoder(r, crc32.New(crcTable))
	magic := make([]byte, len(checkpointMagic))
	if d.fixed(magic); d.err == nil && (!IsCheckpointStream(magic) || d.byte() != checkpointStreamVersion) {
		d.fail(errors.New("not a checkpoint stream of this build"))
	}
	index, term = d.uvarint(), d.uvarint()
	files := d.count(1)
	if files > maxCheckpointFiles {
		d.fail(fmt.Errorf("a checkpoint of %d files", files))
	}
	engineDir := filepath.Join(dir, referredDir)
	if d.err == nil {
		d.fail(os.MkdirAll(engineDir, 0o700))
	}
	seen := map[string]bool{}
	for ; files > 0 && d.err == nil; files-- {
		name := d.string()
		if d.err == nil && (!plainName(name) || seen[name]) {
			d.fail(fmt.Errorf("a checkpoint file named %q", name))
		}
		seen[name] = true
		d.fail(receiveFile(d, filepath.Join(engineDir, name), d.uvarint()))
	}
	sum, ok := d.trailer()
	switch {
	case d.err != nil:
		return 0, 0, fmt.Errorf("receive checkpoint: %w", d.err)
	case !ok || binary.BigEndian.Uint32(sum) != d.sum.Sum32():
		return 0, 0, errors.New("receive checkpoint: checksum mismatch")
	}
	if err := checkReceived(engineDir, index, term); err != nil {
		return 0, 0, fmt.Errorf("receive checkpoint: %w", err)
	}
	if err := store.SyncDir(engineDir); err != nil {
		return 0, 0, err
	}
	return index, term, store.SyncDir(dir)
}

// plainName reports whether name is a file's own name, not a path.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && filepath.Base(name) == name
}

// checkReceived checks that a received checkpoint holds a state file at
// the index and term its stream named.
func checkReceived(engineDir string, index, term uint64) error {
	at, atTerm, err := readKeptPosition(filepath.Join(engineDir, keptFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errors.New("no state file")
	case err != nil:
		return err
	case at != index || atTerm != term:
		return fmt.Errorf("its state file is at %d (term %d), the stream says %d (term %d)", at, atTerm, index, term)
	}
	return nil
}

// receiveFile writes the next size bytes of d into a new file at path.
func receiveFile(d *decoder, path string, size uint64) error {
	if d.err != nil {
		return nil
	}
	file, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer file.Close()
	buf := make([]byte, streamBlock)
	for size > 0 && d.err == nil {
		n := min(size, uint64(len(buf)))
		d.fixed(buf[:n])
		if d.err == nil {
			_, err = file.Write(buf[:n])
			d.fail(err)
		}
		size -= n
	}
	if d.err != nil {
		return nil // d holds it
	}
	if err := file.Sync(); err != nil {
		return err
	}
	return file.Close()
}

// restoreFiles is Restore of a files stream that no sink kept (cluster's
// store keeps one and restores it with RestoreFrom): the files are
// received into a directory of the FSM's, whose engine links them.
func (f *FSM) restoreFiles(r io.Reader) error {
	if f.engines.cfg.Dir == "" {
		return errors.New("restore: a checkpoint's files need a state on disk")
	}
	dir, err := os.MkdirTemp(f.engines.cfg.Dir, "received-")
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(dir)
	if _, _, err := ReceiveCheckpoint(r, dir); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return f.RestoreFrom(dir)
}
