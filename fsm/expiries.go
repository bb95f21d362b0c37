package fsm

import (
	"encoding/binary"
	"fmt"
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

func expiryKey(dst []byte, expiresAt int64, p uint64) []byte {
	dst = binary.BigEndian.AppendUint64(append(dst[:0], expiryPrefix), uint64(expiresAt)^(1<<63))
	return appendPosition(dst, p)
}

// indexExpiry moves the link at p in the expiry index from the expiry
// it was indexed under to the one it is now (each 0 for none).
func (t *recordTable) indexExpiry(p uint64, was, now int64) {
	if was == now {
		return
	}
	if was != 0 {
		t.expiryKey = expiryKey(t.expiryKey, was, p)
		t.eng.delete(t.expiryKey)
	}
	if now != 0 {
		t.expiryKey = expiryKey(t.expiryKey, now, p)
		t.eng.set(t.expiryKey, nil)
	}
}

// expiredBefore lists the positions of the live links expired before t
// that are not disabled on purpose (their owner means to enable them
// again), in position order as a walk of every record gave them (a purge
// applies them in that order on every build): a walk of the index up to
// t, after the writer's changes are written back. The index names
// candidates; each is taken only if its record agrees, so that an entry
// left behind by damage never removes a link.
func (lt *linkTable) expiredBefore(t int64) []uint64 {
	expired := lt.expired(t, 0)
	slices.Sort(expired)
	return expired
}

// anyExpiredBefore reports whether expiredBefore(t) has a link.
func (lt *linkTable) anyExpiredBefore(t int64) bool { return len(lt.expired(t, 1)) > 0 }

// expired is expiredBefore's links in expiry order, at most limit (0:
// all of them).
func (lt *linkTable) expired(t int64, limit int) []uint64 {
	lt.recs.beforeWalk()
	var expired []uint64
	lt.recs.eng.scan([]byte{expiryPrefix}, nil, func(key, _ []byte) bool {
		p, ok := positionAfter(key, 9)
		if !ok {
			panic(fmt.Sprintf("fsm: the engine holds a damaged expiry key %x", key))
		}
		if int64(binary.BigEndian.Uint64(key[1:])^(1<<63)) >= t {
			return false
		}
		if at := expiryOf(lt.recs.walked(p)); at != 0 && at < t {
			expired = append(expired, p)
		}
		return limit == 0 || len(expired) < limit
	})
	return expired
}

// indexExpiries writes the expiry index of a resumed state whose engine
// a build before the index wrote: one walk of the records, in pieces of
// maxDirty keys, each written once the walk has let go of the batch.
func (lt *linkTable) indexExpiries() {
	type entry struct {
		at int64
		p  uint64
	}
	for from, done := lt.recs.first, false; !done; {
		var found []entry
		done = true
		lt.recs.scanFrom(from, false, func(r *record) bool {
			if len(found) == maxDirty {
				from, done = r.pos, false
				return false
			}
			if at := expiryOf(r); at != 0 {
				found = append(found, entry{at, r.pos})
			}
			return true
		})
		for _, e := range found {
			lt.recs.eng.set(expiryKey(nil, e.at, e.p), nil)
		}
	}
}
