package fsm

import (
	"encoding/binary"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/linkraft/linkraft/fsm/store"
)

// crawlableWorkload changes what robots.txt lists every way a command
// can: crawlable links made, edited off and on, their Options replaced
// and cleared, expiries set, moved and reached, links renamed, deleted,
// disabled and purged, in two domains, more links than a limit of 3.
func crawlableWorkload() [][]byte {
	crawl := &Options{Crawlable: true}
	edit := func(code string, now int64, fields EditField, e EditCommand) []byte {
		e.Code, e.Now, e.KeyID, e.Fields = code, now, RootKeyID, fields
		return e.Encode()
	}
	cmds := [][]byte{
		InitCommand{Key: testKey}.Encode(),
		RaiseCommand{To: EntryLevel}.Encode(),
		DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID, Now: 1}.Encode(),
		create(1000,
			CreateRequest{URL: "https://example.com/3", CustomCode: "c3", Options: crawl},
			CreateRequest{URL: "https://example.com/1", CustomCode: "c1", Options: &Options{Crawlable: true, Title: "one"}},
			CreateRequest{URL: "https://example.com/2", CustomCode: "c2", Options: crawl},
			CreateRequest{URL: "https://example.com/n", CustomCode: "n1", Options: &Options{Title: "not crawlable"}},
			CreateRequest{URL: "https://example.com/p", CustomCode: "plain"},
			CreateRequest{URL: "https://example.com/x", CustomCode: "x1", ExpiresAt: 5000, Options: crawl},
			CreateRequest{URL: "https://example.com/d1", CustomCode: "d1", Domain: "a.example", Options: crawl},
			CreateRequest{URL: "https://example.com/d2", CustomCode: "d2", Domain: "a.example", ExpiresAt: 6000, Options: crawl}),
		edit("n1", 1100, EditCrawlable, EditCommand{Crawlable: true}),
		edit("c2", 1101, EditCrawlable, EditCommand{Crawlable: false}),
		edit("c1", 1102, EditTitle, EditCommand{Title: "one, again"}), // still crawlable
		edit("plain", 1103, EditCrawlable, EditCommand{Crawlable: true}),
		edit("x1", 1104, EditExpiresAt, EditCommand{ExpiresAt: 5500}),
		edit("a.example/d2", 1105, EditExpiresAt, EditCommand{ExpiresAt: 0}),
		DeleteCommand{Code: "c3", Now: 1106, KeyID: RootKeyID}.Encode(),
		RenameCommand{NewCode: "a0", Edit: EditCommand{Code: "c1", Now: 1107, KeyID: RootKeyID}}.Encode(),
		edit("n1", 1108, EditCrawlable|EditTitle, EditCommand{}), // its Options cleared
		edit("plain", 1109, EditCrawlable, EditCommand{Crawlable: false}),
		edit("plain", 1110, EditCrawlable, EditCommand{Crawlable: true}),
		edit("a0", 1111, EditCrawlable, EditCommand{Crawlable: false}), // keeps its title
		edit("a0", 1112, EditCrawlable, EditCommand{Crawlable: true}),
	}
	var many []CreateRequest
	for i := range 6 {
		many = append(many, CreateRequest{URL: fmt.Sprintf("https://example.com/m%d", i), CustomCode: fmt.Sprintf("m%d", 5-i), Options: crawl})
	}
	return append(cmds,
		create(1200, many...),
		DeleteCommand{Code: "m0", Now: 1201, KeyID: RootKeyID}.Encode(),
		create(1300, CreateRequest{URL: "https://example.com/e", CustomCode: "e1", ExpiresAt: 4000, Options: crawl}),
		edit("e1", 4100, EditExpiresAt, EditCommand{ExpiresAt: 4100}), // disabled on purpose: the purge keeps it
		PurgeCommand{ExpiredBefore: 5600}.Encode(),                    // x1
		edit("e1", 5700, EditExpiresAt, EditCommand{ExpiresAt: 0}),    // enabled again
	)
}

// crawlableByWalk is what robots.txt lists, from a walk of every link's
// Options and record: the answer before the index, with Until the first
// expiry among the codes listed, and a link disabled on purpose left out
// whatever the time asked.
func crawlableByWalk(f *FSM, domain string, limit int, now int64) ([]string, int64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	expiry := map[string]int64{}
	var codes []string
	for p, o := range f.s.opts.all(f.s.links.positionOf) {
		r := f.s.links.recs.walked(p)
		disabled := r.flags&flagDisabled != 0
		if d, code := SplitCode(r.code); o.Crawlable && r.live() && !disabled && !r.expired(now) && d == domain {
			codes = append(codes, code)
			expiry[code] = r.expiresAt
		}
	}
	slices.Sort(codes)
	codes = codes[:min(len(codes), limit)]
	var until int64
	for _, code := range codes {
		if at := expiry[code]; at != 0 && (until == 0 || at < until) {
			until = at
		}
	}
	return codes, until
}

// crawlableKeys is the crawlable index: each key's expiry and the id of
// the link at its position (a restore packs positions, ids stay).
func crawlableKeys(s *state) map[string]string {
	keys := map[string]string{}
	s.eng.scan([]byte{crawlablePrefix}, nil, func(key, value []byte) bool {
		p, ok := positionFrom(value[8:])
		if !ok {
			panic(fmt.Sprintf("crawlable key %x holds no position", key))
		}
		keys[string(key)] = fmt.Sprintf("expires %d, link %d", binary.BigEndian.Uint64(value), s.links.recs.at(p).id)
		return true
	})
	return keys
}

// sameCrawlable fails unless f lists what a walk lists, for each domain,
// limit and time asked.
func sameCrawlable(t *testing.T, f *FSM, when string) {
	t.Helper()
	for _, domain := range []string{"", "a.example", "b.example"} {
		for _, limit := range []int{3, 100} {
			for _, now := range []int64{0, 4050, 5200, 5600, 6000, 7000} {
				want, wantUntil := crawlableByWalk(f, domain, limit, now)
				got := f.Crawlable(domain, limit, now)
				if !slices.Equal(got.Codes, want) || got.Until != wantUntil {
					t.Fatalf("%s, domain %q, limit %d, at %d: listed %v until %d, want %v until %d",
						when, domain, limit, now, got.Codes, got.Until, want, wantUntil)
				}
			}
		}
	}
}

// TestCrawlableIndex: after every command of a workload that changes what
// robots.txt lists every way it can, the index lists what a walk of every
// link lists; a restore and a kept state's resume hold the same index; an
// entry the index should not hold lists no link.
func TestCrawlableIndex(t *testing.T) {
	dir := t.TempDir()
	f := openIn(t, dir)
	for i, cmd := range crawlableWorkload() {
		applyAll(t, f, cmd)
		sameCrawlable(t, f, fmt.Sprintf("after command %d", i))
	}
	if got := f.CrawlableCodes("", 100, 5000); !slices.Equal(got, []string{"a0", "e1", "m1", "m2", "m3", "m4", "m5", "plain"}) {
		t.Fatalf("the workload ends listing %v", got)
	}
	want := crawlableKeys(f.s)
	if got := crawlableKeys(restoredOnDisk(t, f).s); !maps.Equal(got, want) {
		t.Errorf("a restore indexes %q, the state %q", got, want)
	}
	g := keepAndResume(t, f, dir)
	if got := crawlableKeys(g.s); !maps.Equal(got, want) {
		t.Errorf("a resumed state indexes %q, the state kept %q", got, want)
	}
	sameCrawlable(t, g, "after a resume")

	// An entry left behind by damage: the record decides.
	g.mu.Lock()
	p, _ := g.s.links.lookup("a.example/d1")
	g.s.eng.set(crawlableKey(nil, "a.example/zz"), appendPosition(make([]byte, 8), p))
	g.mu.Unlock()
	applyAll(t, g, create(8000, CreateRequest{URL: "https://example.com/after", CustomCode: "after"}))
	if got := g.CrawlableCodes("a.example", 100, 8000); !slices.Equal(got, []string{"d1", "d2"}) {
		t.Errorf("with a stale entry robots.txt lists %v", got)
	}
}

// TestResumeIndexesCrawlableAndTaggedLinks: a state kept by a build
// before the crawlable and tag indexes (no key, no link flagged, its state
// file of layout 3) is indexed as it is resumed, in more than one piece.
func TestResumeIndexesCrawlableAndTaggedLinks(t *testing.T) {
	dir := t.TempDir()
	f := openIn(t, dir)
	loadLinks(t, f, maxDirty+500, crawled) // each with two tags
	applyAll(t, f, crawlableWorkload()[1:]...)
	want, wantTags := crawlableKeys(f.s), tagIndexIDs(f.s)
	index, err := f.Keep()
	if err != nil || len(want) <= maxDirty {
		t.Fatalf("keep at %d: %v; %d links indexed, want more than one piece's %d", index, err, len(want), maxDirty)
	}
	kept := filepath.Join(dir, keptDir)
	eng := newEngine(kept, store.Options{NoLog: true}, 16, 16)
	if !eng.ready() {
		t.Fatal(eng.err)
	}
	var keys, records [][]byte
	for _, prefix := range []byte{crawlablePrefix, tagPrefix} {
		eng.scan([]byte{prefix}, nil, func(key, _ []byte) bool {
			keys = append(keys, slices.Clone(key))
			return true
		})
	}
	eng.scan([]byte{recordPrefix}, nil, func(key, value []byte) bool {
		var r record
		p, _ := positionAfter(key, 1)
		if err := decodeRecord(value, p, &r, true); err != nil {
			t.Fatal(err)
		}
		if r.flags&flagCrawlable != 0 {
			r.flags &^= flagCrawlable
			records = append(records, slices.Clone(key), encodeRecord(nil, &r))
		}
		return true
	})
	if len(keys) <= len(want) || len(records) == 0 {
		t.Fatalf("the kept engine holds %d crawlable and tag keys (%d crawlable) and %d flagged records", len(keys), len(want), len(records)/2)
	}
	for _, key := range keys {
		eng.delete(key)
	}
	for i := 0; i < len(records); i += 2 {
		eng.set(records[i], records[i+1])
	}
	g := resumeAsKeptBy(t, eng, dir, index, keptExpiries) // the layout before the indexes
	if got := crawlableKeys(g.s); !maps.Equal(got, want) {
		t.Errorf("the resumed state indexes %q, the state kept %q", got, want)
	}
	if got := tagIndexIDs(g.s); !sameTagIndex(got, wantTags) {
		t.Errorf("the resumed state indexes the tags %v, the state kept %v", got, wantTags)
	}
	sameCrawlable(t, g, "after the resume")
}

// BenchmarkCrawlable reports what robots.txt's answer costs at 200k links
// with Options: none of them crawlable, and every one (the first 5000 in
// code order listed).
func BenchmarkCrawlable(b *testing.B) {
	for _, kind := range []linkKind{titled, crawled} {
		b.Run(kind.String(), func(b *testing.B) {
			f := onDisk(b)
			defer f.Close()
			loadLinks(b, f, 200_000, kind)
			want := 0
			if kind == crawled {
				want = 5000
			}
			b.ResetTimer()
			for range b.N {
				if got := f.Crawlable("", 5000, 1); len(got.Codes) != want {
					b.Fatalf("%d codes listed, want %d", len(got.Codes), want)
				}
			}
		})
	}
}
