package fsm

import (
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"unicode"
	"unicode/utf8"
)

// The tag index is what a tag's rename or deletion reads: a key `g` + the
// tag folded (length-prefixed) + the position, with no value, for each
// tag of each link with Options. A tag's links are its keys in position
// order, so the rename visits them and no other link; before the index it
// decoded every link's Options in its apply, on every node (0.65 s at
// 200,000 links with titles and tags).
//
// The option table keeps it: a link's Options are set and dropped only
// there, which knows the tags before and after. It is derived: snapshots
// do not hold it, a restore writes it as it sets each link's Options, and
// a kept state or checkpoint of a layout before it gets it at its resume
// (optionTable.index).

const tagPrefix = 'g'

// foldTag is tag with each letter replaced by the least of the letters
// strings.EqualFold takes for it (its unicode.SimpleFold orbit): two tags
// are EqualFold exactly when their folds are equal.
func foldTag(tag string) string {
	b := make([]byte, 0, len(tag))
	for _, r := range tag {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b = utf8.AppendRune(b, least)
	}
	return string(b)
}

// tagPrefixKey is the start of every key of the tag folded as folded.
func tagPrefixKey(dst []byte, folded string) []byte {
	dst = binary.AppendUvarint(append(dst[:0], tagPrefix), uint64(len(folded)))
	return append(dst, folded...)
}

// retag moves the link at p in the index from the tags it had to the ones
// it has (each nil for none).
func (o *optionTable) retag(p uint64, had, has []string) {
	was, now := foldTags(had), foldTags(has)
	for _, t := range was {
		if !slices.Contains(now, t) {
			o.tagKey = appendPosition(tagPrefixKey(o.tagKey, t), p)
			o.eng.delete(o.tagKey)
		}
	}
	for _, t := range now {
		if !slices.Contains(was, t) {
			o.tagKey = appendPosition(tagPrefixKey(o.tagKey, t), p)
			o.eng.set(o.tagKey, nil)
		}
	}
}

func foldTags(tags []string) []string {
	folded := make([]string, 0, len(tags))
	for _, t := range tags {
		if f := foldTag(t); !slices.Contains(folded, f) {
			folded = append(folded, f)
		}
	}
	return folded
}

// tagged yields the positions, ascending, of the links the index holds
// under tag (in any letter case): candidates, which the caller checks
// against their Options.
func (o *optionTable) tagged(tag string) iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		prefix := tagPrefixKey(nil, foldTag(tag))
		o.eng.scan(prefix, nil, func(key, _ []byte) bool {
			p, ok := positionFrom(key[len(prefix):])
			if !ok {
				panic(fmt.Sprintf("fsm: the engine holds a damaged tag key %x", key))
			}
			return yield(p)
		})
	}
}

// index writes the crawlable and tag indexes (crawlable.go, above) of a
// resumed state whose engine a build before them wrote: one walk of the
// links' Options, in pieces of maxDirty links that are crawlable or
// tagged, each written once the walk has let go of the batch.
func (o *optionTable) index(positionOf func(id uint64) (uint64, bool)) {
	type indexed struct {
		p    uint64
		opts *Options
	}
	for from := []byte(nil); ; {
		var found []indexed
		var next []byte
		o.scanFrom(from, func(key []byte, id uint64, opts *Options) bool {
			if len(found) == maxDirty {
				next = append(next, key...)
				return false
			}
			if !opts.Crawlable && len(opts.Tags) == 0 {
				return true
			}
			p, ok := positionOf(id)
			if !ok {
				panic(fmt.Sprintf("fsm: the engine holds options under %x of no link", key))
			}
			found = append(found, indexed{p, opts})
			return true
		})
		for _, f := range found {
			o.retag(f.p, nil, f.opts.Tags)
			if f.opts.Crawlable {
				o.recs.flagCrawlable(f.p)
			}
		}
		o.recs.writeBack()
		if next == nil {
			return
		}
		from = next
	}
}
