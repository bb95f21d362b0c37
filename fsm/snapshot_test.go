package fsm

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// TestSnapshotVersionMatchesTheRaise: a raised state is written in the
// version its level picks, and a snapshot that pairs the raise with
// another version (so that it would be written back without the sections
// of its level, or with ones it lacks) is refused.
func TestSnapshotVersionMatchesTheRaise(t *testing.T) {
	for _, c := range []struct {
		level   int
		version byte
	}{
		{LevelBounds, snapshotV8},
		{LevelCerts, snapshotV9},
		{LevelVisitRows, snapshotV10},
		{LevelRemovals, snapshotV11},
		{LevelTargets, snapshotV12},
		{LevelDisabled, snapshotV13},
	} {
		f := New()
		applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: c.level}.Encode())
		good := snapshotBytes(t, f)
		if v := good[len(snapshotMagic)]; v != c.version {
			t.Fatalf("raised to %d: version %d, want %d", c.level, v, c.version)
		}
		// The raise follows the version byte; each level is one byte.
		for _, other := range []byte{LevelBounds, LevelCerts, LevelVisitRows, LevelRemovals, LevelTargets, LevelDisabled} {
			if int(other) == c.level {
				continue
			}
			bad := bytes.Clone(good)
			bad[len(snapshotMagic)+1] = other
			binary.BigEndian.PutUint32(bad[len(bad)-4:], crc32.Checksum(bad[:len(bad)-4], crcTable))
			if err := New().Restore(nopCloser{bytes.NewReader(bad)}); err == nil {
				t.Errorf("a version %d snapshot raised to %d: restored", c.version, other)
			}
		}
	}
}
