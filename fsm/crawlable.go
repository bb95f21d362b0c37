package fsm

import (
	"encoding/binary"
	"fmt"
)

// The crawlable index is what robots.txt reads: a key `k` + the domain
// (length-prefixed) + the code, for each live link whose Options say it
// is crawlable (flagCrawlable) and that is not disabled on purpose
// (flagDisabled), valued with the link's expiry (8 bytes, 0 for none) and
// its position. A domain's crawlable links are its keys in code order, so
// robots.txt reads the first it lists and stops, and skips an expired link
// without reading its record; before the index it decoded every link's
// Options and read its record under the FSM's read lock, which held up
// applying for the whole walk (45 s at 2M links with titles).
//
// The record table keeps it as it keeps the expiry index: writeBack moves a
// changed record's key where its liveness, flags, code or expiry changed,
// from what the record was when the batch first changed it. It is derived:
// snapshots do not hold it, a restore writes it as it sets each link's
// Options, and a kept state or checkpoint of a layout before it gets it at
// its resume (optionTable.index).

const crawlablePrefix = 'k'

// crawlEntry is what the index holds of a link: its qualified code and
// expiry. ok is false for a link the index does not hold.
type crawlEntry struct {
	code      string
	expiresAt int64
	ok        bool
}

// crawlEntryOf is the index entry of the record. A link disabled on
// purpose has none: it is past its expiry, and the purge keeps it, so
// every answer would skip its entry for as long as it stays disabled.
func crawlEntryOf(r *record) crawlEntry {
	if !r.live() || r.flags&flagCrawlable == 0 || r.flags&flagDisabled != 0 {
		return crawlEntry{}
	}
	return crawlEntry{code: r.code, expiresAt: r.expiresAt, ok: true}
}

// crawlablePrefixKey is the start of every key of domain's links.
func crawlablePrefixKey(dst []byte, domain string) []byte {
	dst = binary.AppendUvarint(append(dst[:0], crawlablePrefix), uint64(len(domain)))
	return append(dst, domain...)
}

func crawlableKey(dst []byte, qualified string) []byte {
	domain, code := SplitCode(qualified)
	return append(crawlablePrefixKey(dst, domain), code...)
}

// indexCrawlable moves the link at p in the index from the entry it was
// indexed under to the one it has now.
func (t *recordTable) indexCrawlable(p uint64, was, now crawlEntry) {
	if was == now {
		return
	}
	if was.ok && (!now.ok || was.code != now.code) {
		t.crawlKey = crawlableKey(t.crawlKey, was.code)
		t.eng.delete(t.crawlKey)
	}
	if now.ok {
		t.crawlKey = crawlableKey(t.crawlKey, now.code)
		t.crawlValue = appendPosition(binary.BigEndian.AppendUint64(t.crawlValue[:0], uint64(now.expiresAt)), p)
		t.eng.set(t.crawlKey, t.crawlValue)
	}
}

// crawlable is Crawlable's answer from the index: the first limit codes of
// domain's live, unexpired crawlable links at now, in code order, and the
// first expiry among them. The index names candidates; each is listed only
// if its record agrees, so that an entry left behind by damage lists no
// other link.
func (lt *linkTable) crawlable(domain string, limit int, now int64) (codes []string, until int64) {
	lt.recs.beforeWalk()
	prefix := crawlablePrefixKey(nil, domain)
	lt.recs.eng.scan(prefix, nil, func(key, value []byte) bool {
		if len(codes) >= limit {
			return false
		}
		if len(value) < 8 {
			panic(fmt.Sprintf("fsm: the engine holds a damaged crawlable entry %x", key))
		}
		expiresAt := int64(binary.BigEndian.Uint64(value))
		if expiresAt != 0 && now >= expiresAt {
			return true
		}
		p, ok := positionFrom(value[8:])
		if !ok {
			panic(fmt.Sprintf("fsm: the engine holds a damaged crawlable entry %x", key))
		}
		code := string(key[len(prefix):])
		r := lt.recs.walked(p)
		if e := crawlEntryOf(r); !e.ok || e.code != QualifiedCode(domain, code) || e.expiresAt != expiresAt {
			return true
		}
		codes = append(codes, code)
		if expiresAt != 0 && (until == 0 || expiresAt < until) {
			until = expiresAt
		}
		return true
	})
	return codes, until
}

// flagCrawlable marks the live link at p crawlable for a resume's index
// (optionTable.index), its key written whatever the flag was: the index
// of a state kept before it holds none.
func (t *recordTable) flagCrawlable(p uint64) {
	if r := t.mutable(p); r.live() {
		r.flags |= flagCrawlable
		if w, ok := t.was[p]; ok {
			w.crawl = crawlEntry{}
			t.was[p] = w
		}
	}
}
