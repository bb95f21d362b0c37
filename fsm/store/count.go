package store

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// A count is a 4-byte big-endian unsigned integer that Batch.AddCount
// adds to without reading it: the engine sums the additions when the key
// is read or compacted (a Pebble merge operator), saturating at
// math.MaxUint32. Set writes a count whole (a restore).

// countMergerName is stored in the engine's options file: an engine
// written with another merger does not open.
const countMergerName = "linkraft.count32"

func countMerger() *pebble.Merger {
	return &pebble.Merger{Name: countMergerName, Merge: func(_, value []byte) (pebble.ValueMerger, error) {
		var c countSum
		return &c, c.MergeNewer(value)
	}}
}

// countSum is the sum of a key's counts; addition does not care for their
// order.
type countSum struct{ sum uint32 }

func (c *countSum) MergeNewer(value []byte) error {
	if len(value) != 4 {
		return fmt.Errorf("store: a count of %d bytes, not 4", len(value))
	}
	c.sum = addCount(c.sum, binary.BigEndian.Uint32(value))
	return nil
}

func (c *countSum) MergeOlder(value []byte) error { return c.MergeNewer(value) }

func (c *countSum) Finish(bool) ([]byte, io.Closer, error) {
	return binary.BigEndian.AppendUint32(nil, c.sum), nil, nil
}

func addCount(a, b uint32) uint32 {
	if b > math.MaxUint32-a {
		return math.MaxUint32
	}
	return a + b
}

// AddCount adds n (at most math.MaxUint32 counts) to the count under key.
func (b *Batch) AddCount(key []byte, n uint64) error {
	if err := checkKey(key); err != nil {
		return err
	}
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], uint32(min(n, math.MaxUint32)))
	if err := b.pb.Merge(key, v[:], nil); err != nil {
		return fmt.Errorf("store: batch add to %q: %w", key, err)
	}
	return nil
}
