package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

// The stream is the whole state as one versioned, checksummed sequence of
// sorted records, independent of Pebble's files (DESIGN.md, "Transfer"):
//
//	magic "LKSTORE\n", uvarint version, uvarint applied index
//	per record: uvarint shared, uvarint unshared, key[shared:], uvarint len, value
//	            (shared: bytes in common with the previous key)
//	end:        uvarint 0, uvarint 0, uvarint record count
//	CRC-32C (Castagnoli) of every byte before it, 4 bytes big-endian
//
// Keys are strictly ascending and non-empty, so "0 shared, 0 unshared" (an
// empty key) can only be the end.
const (
	streamMagic   = "LKSTORE\n"
	streamVersion = 1
	// maxKey and maxValue bound what a reader holds for one record, so a
	// corrupt length cannot make it allocate without limit.
	maxKey   = 64 << 10
	maxValue = 16 << 20
	// installBatchBytes bounds one batch of a stream being installed, and
	// a quarter of a memtable: Pebble hands a batch over half of one to
	// the flush as it is (a "flushable batch"), buffer and all.
	installBatchBytes = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned by ReadStream for a stream that is not one
// WriteStream wrote: a bad header, an unsorted or oversized record, a
// count or checksum that does not match, or a truncation.
var ErrCorrupt = errors.New("store: corrupt stream")

// Snapshot is a consistent view of the engine at one applied index; it
// stays readable while commits go on, and pins the files it reads until
// Close.
type Snapshot struct {
	snap    *pebble.Snapshot
	applied uint64
}

// Snapshot takes a view of the engine as of the last Commit.
func (s *Store) Snapshot() (*Snapshot, error) {
	snap := s.db.NewSnapshot()
	v, closer, err := snap.Get(appliedKey)
	var applied uint64
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		snap.Close()
		return nil, fmt.Errorf("store: snapshot: %w", err)
	default:
		applied = binary.BigEndian.Uint64(v)
		closer.Close()
	}
	return &Snapshot{snap: snap, applied: applied}, nil
}

// AppliedIndex is the index the view is at.
func (sn *Snapshot) AppliedIndex() uint64 { return sn.applied }

// Scan is Store.Scan on the view.
func (sn *Snapshot) Scan(prefix, from []byte, fn func(key, value []byte) bool) error {
	return scan(sn.snap, prefix, prefixEnd(prefix), from, fn)
}

// Get is Store.Get on the view.
func (sn *Snapshot) Get(key, dst []byte) ([]byte, bool, error) { return get(sn.snap, key, dst) }

// Close releases the view.
func (sn *Snapshot) Close() error { return sn.snap.Close() }

// WriteStream writes the view as a stream and returns its record count.
// It holds one record and a 64 KiB buffer in memory whatever the size.
func (sn *Snapshot) WriteStream(w io.Writer) (uint64, error) {
	sw := newStreamWriter(w, sn.applied)
	err := scan(sn.snap, []byte{metaPrefix + 1}, nil, nil, func(key, value []byte) bool {
		sw.record(key, value)
		return true
	})
	if err != nil {
		return sw.n, err
	}
	return sw.n, sw.end()
}

// streamWriter encodes a stream. It does not check the order of the keys:
// a snapshot's iterator yields them sorted (and the tests need unsorted
// streams to see them refused).
type streamWriter struct {
	w    io.Writer
	bw   *bufio.Writer
	crc  hash.Hash32
	buf  []byte
	prev []byte
	n    uint64
}

func newStreamWriter(w io.Writer, applied uint64) *streamWriter {
	crc := crc32.New(castagnoli)
	sw := &streamWriter{w: w, bw: bufio.NewWriterSize(io.MultiWriter(w, crc), 64<<10), crc: crc}
	sw.buf = append(sw.buf, streamMagic...)
	sw.buf = binary.AppendUvarint(sw.buf, streamVersion)
	sw.buf = binary.AppendUvarint(sw.buf, applied)
	sw.bw.Write(sw.buf)
	return sw
}

// record writes one record; errors surface at end (a bufio.Writer keeps
// its first one).
func (sw *streamWriter) record(key, value []byte) {
	shared := commonPrefix(sw.prev, key)
	sw.buf = binary.AppendUvarint(sw.buf[:0], uint64(shared))
	sw.buf = binary.AppendUvarint(sw.buf, uint64(len(key)-shared))
	sw.buf = append(sw.buf, key[shared:]...)
	sw.buf = binary.AppendUvarint(sw.buf, uint64(len(value)))
	sw.bw.Write(sw.buf)
	sw.bw.Write(value)
	sw.prev = append(sw.prev[:0], key...)
	sw.n++
}

// end writes the end mark, the record count and the checksum.
func (sw *streamWriter) end() error {
	sw.buf = binary.AppendUvarint(sw.buf[:0], 0)
	sw.buf = binary.AppendUvarint(sw.buf, 0)
	sw.buf = binary.AppendUvarint(sw.buf, sw.n)
	sw.bw.Write(sw.buf)
	if err := sw.bw.Flush(); err != nil {
		return fmt.Errorf("store: write stream: %w", err)
	}
	if _, err := sw.w.Write(sw.crc.Sum(nil)); err != nil {
		return fmt.Errorf("store: write stream: %w", err)
	}
	return nil
}

// WriteStream writes a view of the engine as of the last Commit.
func (s *Store) WriteStream(w io.Writer) (applied, records uint64, err error) {
	sn, err := s.Snapshot()
	if err != nil {
		return 0, 0, err
	}
	defer sn.Close()
	records, err = sn.WriteStream(w)
	return sn.applied, records, err
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// ReadStream builds a new engine in dir, which must not exist, from a
// stream, and returns its applied index. Memory stays bounded whatever the
// stream's size: one record, one batch of installBatchBytes, and the
// engine's memtables and cache. The engine is complete and on disk when
// ReadStream returns; on any error dir is removed. ReadStream writes no
// log of its own (the stream can be read again): it flushes once at the
// end.
func ReadStream(r io.Reader, dir string, opts Options) (uint64, error) {
	po := pebbleOptions(opts)
	po.DisableWAL = true
	po.ErrorIfExists = true
	db, err := openPebble(dir, po)
	if err != nil {
		return 0, fmt.Errorf("store: install into %s: %w", dir, err)
	}
	applied, err := readInto(db, r, min(installBatchBytes, int(po.MemTableSize/4)))
	if err == nil {
		err = db.Flush()
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(dir)
		return 0, fmt.Errorf("store: install into %s: %w", dir, err)
	}
	return applied, nil
}

// readInto applies the stream's records to db in batches of bounded size,
// then its format and applied index, once the stream's end checks out.
func readInto(db *pebble.DB, raw io.Reader, batchBytes int) (uint64, error) {
	// Kept across Reset: Pebble drops a batch's buffer above 1 MiB.
	b := db.NewBatch(pebble.WithMaxRetainedSizeBytes(4 * batchBytes))
	defer b.Close()
	applied, err := decodeStream(raw, func(key, value []byte) error {
		b.Set(key, value, nil)
		if b.Len() < batchBytes {
			return nil
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			return err
		}
		b.Reset()
		return nil
	})
	if err != nil {
		return 0, err
	}
	var v [8]byte
	b.Set(formatKey, binary.BigEndian.AppendUint64(v[:0], formatVersion), nil)
	b.Set(appliedKey, binary.BigEndian.AppendUint64(v[:0], applied), nil)
	return applied, db.Apply(b, pebble.NoSync)
}

// decodeStream checks a stream and passes each record to fn (the slices
// are reused: valid only during the call), and returns its applied index.
// The records passed before an error must be discarded.
func decodeStream(raw io.Reader, fn func(key, value []byte) error) (uint64, error) {
	sr := &streamReader{r: bufio.NewReaderSize(raw, 64<<10), crc: crc32.New(castagnoli)}
	applied, err := sr.header()
	if err != nil {
		return 0, err
	}
	var key, value []byte
	var n uint64
	for {
		var end bool
		key, value, end, err = sr.record(key, value)
		if err != nil {
			return 0, err
		}
		if end {
			break
		}
		if err := fn(key, value); err != nil {
			return 0, err
		}
		n++
	}
	if err := sr.trailer(n); err != nil {
		return 0, err
	}
	return applied, nil
}

// streamReader decodes a stream, summing every byte it hands out.
type streamReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	one [1]byte
}

func (sr *streamReader) ReadByte() (byte, error) {
	c, err := sr.r.ReadByte()
	if err == nil {
		sr.one[0] = c
		sr.crc.Write(sr.one[:])
	}
	return c, err
}

func (sr *streamReader) full(buf []byte) error {
	if _, err := io.ReadFull(sr.r, buf); err != nil {
		return corrupt("truncated: %v", err)
	}
	sr.crc.Write(buf)
	return nil
}

func (sr *streamReader) uvarint() (uint64, error) {
	v, err := binary.ReadUvarint(sr)
	if err != nil {
		return 0, corrupt("truncated or bad number: %v", err)
	}
	return v, nil
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func (sr *streamReader) header() (uint64, error) {
	magic := make([]byte, len(streamMagic))
	if err := sr.full(magic); err != nil {
		return 0, err
	}
	if string(magic) != streamMagic {
		return 0, corrupt("not a linkraft store stream")
	}
	version, err := sr.uvarint()
	if err != nil {
		return 0, err
	}
	if version != streamVersion {
		return 0, fmt.Errorf("store: stream version %d; this build reads %d", version, streamVersion)
	}
	return sr.uvarint()
}

// record reads the next record into key and value (reused), or reports
// the end.
func (sr *streamReader) record(prev, value []byte) (key, val []byte, end bool, err error) {
	shared, err := sr.uvarint()
	if err != nil {
		return nil, nil, false, err
	}
	unshared, err := sr.uvarint()
	if err != nil {
		return nil, nil, false, err
	}
	if shared == 0 && unshared == 0 {
		return prev, value, true, nil
	}
	if shared > uint64(len(prev)) || shared+unshared > maxKey {
		return nil, nil, false, corrupt("key of %d+%d bytes after one of %d", shared, unshared, len(prev))
	}
	// The key is built over the previous one, in place: it is above it if
	// it extends it, or if its first new byte is above the byte it replaces.
	above, replaced := shared == uint64(len(prev)), byte(0)
	if !above {
		replaced = prev[shared]
	}
	key = grow(prev, int(shared+unshared))
	if err := sr.full(key[shared:]); err != nil {
		return nil, nil, false, err
	}
	if unshared == 0 || !above && key[shared] <= replaced || key[0] == metaPrefix {
		return nil, nil, false, corrupt("key %q out of order or reserved", key)
	}
	n, err := sr.uvarint()
	if err != nil {
		return nil, nil, false, err
	}
	if n > maxValue {
		return nil, nil, false, corrupt("value of %d bytes", n)
	}
	val = grow(value, int(n))
	return key, val, false, sr.full(val)
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		nb := make([]byte, n, n+n/4)
		copy(nb, b)
		return nb
	}
	return b[:n]
}

func (sr *streamReader) trailer(records uint64) error {
	n, err := sr.uvarint()
	if err != nil {
		return err
	}
	if n != records {
		return corrupt("%d records, the end says %d", records, n)
	}
	want := sr.crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(sr.r, sum[:]); err != nil {
		return corrupt("no checksum: %v", err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return corrupt("checksum %08x, content sums to %08x", got, want)
	}
	return nil
}
