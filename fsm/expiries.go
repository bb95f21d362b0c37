package fsm

import (
	"encoding/binary"
	"slices"
)

// The expiry index lets the purge find the links expired before a time
// without reading every record: a key `e` + the expiry (8 bytes, order
// kept for any int64) + the position, with no value, for each live link
// that has an expiry and is not disabled on purpose (those the purge
// removes). The record table keeps it: writeBack writes each changed
// record's key where the record's expiry, liveness or flag changed, from
// what the record was when the batch first changed it (recordTable.was).
// It is derived: snapshots do not hold it, a restore writes it as it
// writes the records, and a kept state or checkpoint of a layout before
// it gets it at its resume (indexExpiries).

const expiryPrefix = 'e'

// expiryOf is the expiry under which the record is indexed: 0 for none.
// An expiry is a time in unix milliseconds; 0 is no expiry.
func expiryOf(r *record) int64 {
	if !r.live() || r.expiresAt == 0 || r.flags&flagDisabled != 0 {
		return 0
	}
	return r.expiresAt
}

func expiryKey(dst []byte, expiresAt int64, p uint32) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst[:0], expiryPrefix), uint64(expiresAt)^(1<<63))
	return binary.BigEndian.AppendUint32(dst, p)
}

// indexExpiry moves the link at p in the expiry index from the expiry
// it was indexed under to the one it is now (each 0 for none).
func (t *recordTable) indexExpiry(p uint32, was, now int64) {
	if was == now {
		return
	}
	if was != 0 {
		t.eng.delete(expiryKey(t.expiryKey[:0], was, p))
	}
	if now != 0 {
		t.eng.set(expiryKey(t.expiryKey[:0], now, p), nil)
	}
}

// expiredBefore lists the positions of the live links expired before t
// that are not disabled on purpose (their owner means to enable them
// again), in position order as a walk of every record gave them (a purge
// applies them in that order on every build): a walk of the index up to
// t, after the writer's changes are written back.
func (lt *linkTable) expiredBefore(t int64) []uint32 {
	if len(lt.recs.dirty) > 0 && lt.recs.eng.writer() {
		lt.recs.writeBack()
	}
	var expired []uint32
	lt.recs.eng.scan([]byte{expiryPrefix}, nil, func(key, _ []byte) bool {
		if len(key) != 13 || int64(binary.BigEndian.Uint64(key[1:])^(1<<63)) >= t {
			return false
		}
		expired = append(expired, binary.BigEndian.Uint32(key[9:]))
		return true
	})
	slices.Sort(expired)
	return expired
}

// indexExpiries writes the expiry index of a resumed state whose engine
// a build before the index wrote: one walk of the records.
func (lt *linkTable) indexExpiries() {
	lt.recs.scan(false, func(r *record) bool {
		if at := expiryOf(r); at != 0 {
			lt.recs.eng.set(expiryKey(nil, at, r.pos), nil)
		}
		return true
	})
}
