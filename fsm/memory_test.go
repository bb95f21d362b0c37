package fsm

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/store"
)

// benchURL is a realistic ~110-byte target, distinct per i.
func benchURL(i int) string {
	return fmt.Sprintf("https://www.example-shop.com/catalogue/category-%03d/products/item-%08d?utm_medium=email&utm_source=newsletter", i%1000, i)
}

// linkKind is how a benchmark's links are created.
type linkKind int

const (
	imported linkKind = iota // custom codes, as /admin/import creates them
	deduped                  // counter codes with dedupe
	keyed                    // counter codes with an idempotency key, as every create through a follower has
	authored                 // custom codes made with an API key at LevelTargets: each records its author
	titled                   // custom codes with a title and two tags, as a link made in the web UI
	crawled                  // titled, and crawlable: robots.txt lists them
)

func (k linkKind) String() string {
	return [...]string{"imported", "dedupe", "idempotency-key", "authored", "titled", "crawlable"}[k]
}

// benchAuthor is the key authored links are made with.
const benchAuthor = "aaaaaaaaaaaa"

// loadLinks applies n creates of one kind in batches of 1000.
func loadLinks(tb testing.TB, f *FSM, n int, kind linkKind) {
	tb.Helper()
	index := uint64(1)
	apply := func(cmd []byte) {
		f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: cmd}})
		index++
	}
	apply(InitCommand{Key: testKey}.Encode())
	if kind == crawled { // crawlable Options came with LevelVisitRows
		apply(RaiseCommand{To: EntryLevel}.Encode())
	}
	if kind == authored {
		apply(RaiseCommand{To: LevelTargets}.Encode())
		apply(KeyCreateCommand{Key: testAPIKey(benchAuthor, ScopeLinksWrite, AllWorkspaces), By: RootKeyID}.Encode())
	}
	for start := 0; start < n; start += 1000 {
		items := make([]CreateRequest, 0, 1000)
		for i := start; i < start+1000 && i < n; i++ {
			r := CreateRequest{URL: benchURL(i)}
			switch kind {
			case imported:
				r.CustomCode = fmt.Sprintf("c%07d", i)
			case authored:
				r.CustomCode, r.KeyID = fmt.Sprintf("c%07d", i), benchAuthor
			case deduped:
				r.Dedupe = true
			case keyed:
				r.RequestID = fmt.Sprintf("%032x", i)
			case titled, crawled:
				r.CustomCode = fmt.Sprintf("c%07d", i)
				r.Options = &Options{Title: fmt.Sprintf("Autumn catalogue, item %d", i), Tags: []string{"newsletter", fmt.Sprintf("campaign-%d", i%50)},
					Crawlable: kind == crawled}
			}
			items = append(items, r)
		}
		apply(create(int64(start), items...))
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// onDisk is an FSM whose engine is in a directory, as a node's is: an
// engine in memory would count its files as heap.
func onDisk(tb testing.TB) *FSM {
	tb.Helper()
	return openIn(tb, tb.TempDir())
}

// openIn is Open of an FSM whose engine is in dir, failing the test on
// an error.
func openIn(tb testing.TB, dir string) *FSM {
	tb.Helper()
	f, err := Open(Config{Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// BenchmarkMemoryPerLink reports the Go heap one stored link costs, for
// each linkKind, and for links imported or made with dedupe what the
// engine holds per link on disk, in all and in the target index. Each
// iteration loads linksPerRun links.
func BenchmarkMemoryPerLink(b *testing.B) {
	const linksPerRun = 200_000
	for _, kind := range []linkKind{imported, deduped, keyed, authored, titled} {
		b.Run(kind.String(), func(b *testing.B) {
			for range b.N {
				before := heapInUse()
				f := onDisk(b)
				loadLinks(b, f, linksPerRun, kind)
				after := heapInUse()
				b.ReportMetric(float64(after-before)/linksPerRun, "heap-B/link")
				runtime.KeepAlive(f)
				if kind == imported || kind == deduped {
					b.ReportMetric(float64(tableBytesOnDisk(b, f, nil))/linksPerRun, "engine-B/link")
					b.ReportMetric(float64(tableBytesOnDisk(b, f, []byte{targetPrefix}))/linksPerRun, "targets-B/link")
				}
				f.Close()
			}
		})
	}
}

// BenchmarkSnapshotRestore measures writing and restoring a snapshot of
// linksPerRun links, imported or made with dedupe (each then marked as
// its URL's dedupe link, which a restore checks): the restart path of a
// node.
func BenchmarkSnapshotRestore(b *testing.B) {
	const linksPerRun = 200_000
	for _, kind := range []linkKind{imported, deduped} {
		b.Run(kind.String(), func(b *testing.B) {
			src := New()
			loadLinks(b, src, linksPerRun, kind)
			var buf bytes.Buffer
			if err := src.WriteBackup(&buf); err != nil {
				b.Fatal(err)
			}
			b.Run("write", func(b *testing.B) {
				for range b.N {
					if err := src.WriteBackup(io.Discard); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(buf.Len())/linksPerRun, "B/link")
			})
			b.Run("restore", func(b *testing.B) {
				for range b.N {
					if err := New().Restore(nopCloser{bytes.NewReader(buf.Bytes())}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkMemoryPerClickedLink reports what clicks per hour add to a
// link's heap, with every link clicked in each of hoursPerLink hours, and
// how long applying one click batch of batchCodes codes takes.
func BenchmarkMemoryPerClickedLink(b *testing.B) {
	const (
		linksPerRun  = 200_000
		hoursPerLink = 24
		batchCodes   = 10_000
	)
	for range b.N {
		f := onDisk(b)
		loadLinks(b, f, linksPerRun, imported)
		before := heapInUse()
		index, seq := uint64(1_000_000), uint64(0)
		var applying time.Duration // the batches' apply alone, not their encoding
		for h := range int64(hoursPerLink) {
			for start := 0; start < linksPerRun; start += batchCodes {
				counts := make([]ClickCount, 0, batchCodes)
				for i := start; i < start+batchCodes; i++ {
					counts = append(counts, ClickCount{Code: fmt.Sprintf("c%07d", i), Count: 3})
				}
				seq++
				cmd := ClickBatch{Node: "n1", Seq: seq, Now: (480_000 + h) * hourMillis, Counts: counts}.Encode()
				began := time.Now()
				f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: cmd}})
				applying += time.Since(began)
				index++
			}
		}
		batches := float64(hoursPerLink * linksPerRun / batchCodes)
		b.ReportMetric(float64(applying.Microseconds())/batches, "µs/batch")
		after := heapInUse()
		b.ReportMetric(float64(after-before)/linksPerRun, "heap-B/clicked-link")
		runtime.KeepAlive(f)
		f.Close()
	}
}

// talliedLinks applies, to links c0000000… (loadLinks' imported ones),
// hours hours of clicks of visitorsPerHour distinct visitors each, in a
// cluster raised to LevelVisitRows unless plain.
func talliedLinks(f *FSM, links, hours, visitorsPerHour int, plain bool) {
	index, seq := uint64(1_000_000), uint64(0)
	apply := func(cmd []byte) {
		f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: cmd}})
		index++
	}
	if !plain {
		apply(RaiseCommand{To: LevelVisitRows}.Encode())
	}
	for h := range hours {
		for start := 0; start < links; start += 100 {
			var counts []ClickCount
			for i := start; i < start+100 && i < links; i++ {
				for v := range visitorsPerHour {
					counts = append(counts, ClickCount{Code: fmt.Sprintf("c%07d", i), Count: 1, Visitor: variedVisitor(v + h)})
				}
			}
			seq++
			apply(ClickBatch{Node: "n1", Seq: seq, Now: (480_000 + int64(h)) * hourMillis, Counts: counts, Visitors: true}.Encode())
		}
	}
}

// TestTalliesAreBounded: a flood of distinct visitors keeps at most
// MaxTuplesPerHour tuples (and the two bot kinds) an hour, and a day of
// such hours weighs on disk their packed size or less (a tuple and its
// count are varints: 5 bytes here, not 8). The days are on disk, not on
// the heap: BenchmarkMemoryPerTalliedLink reports both.
func TestTalliesAreBounded(t *testing.T) {
	const links, hours, visitorsPerHour = 1000, 24, 100
	f := onDisk(t)
	defer f.Close()
	loadLinks(t, f, links, imported)
	talliedLinks(f, links, hours, visitorsPerHour, false)
	packed := hours * maxTuples * 8
	var largest int
	for _, l := range f.Links() {
		days := engineVisitDays(f, l.ID)
		if len(days) != 1 || len(days[0].day.tallies) != hours {
			t.Fatalf("link %s keeps %d days on disk, want one of %d hours", l.Code, len(days), hours)
		}
		for _, h := range days[0].day.tallies {
			if h.people() > MaxTuplesPerHour || len(h.tuples) > maxTuples || h.overflow == 0 {
				t.Fatalf("link %s hour %d keeps %d tuples, %d past the bound", l.Code, h.hour, len(h.tuples), h.overflow)
			}
		}
		largest = max(largest, days[0].size)
	}
	t.Logf("a day of flooded hours weighs %d bytes on disk at most, packed %d", largest, packed)
	if largest > packed {
		t.Errorf("a day of flooded hours weighs %d bytes on disk, want at most %d", largest, packed)
	}
}

// BenchmarkMemoryPerTalliedLink reports what a day of visitors adds to a
// link's heap, to its engine's keys and values (uncompressed: what a
// link's visitors weigh on disk before Pebble's compression), and to its
// snapshot, without tallies and with them, with every link clicked by
// visitorsPerHour distinct visitors in each of 24 hours.
func BenchmarkMemoryPerTalliedLink(b *testing.B) {
	const links, visitorsPerHour = 10_000, 20
	for _, plain := range []bool{true, false} {
		b.Run(map[bool]string{true: "day-counts", false: "with-tallies"}[plain], func(b *testing.B) {
			for range b.N {
				f := onDisk(b)
				loadLinks(b, f, links, imported)
				unclicked := snapshotBytes(b, f)
				before := heapInUse()
				talliedLinks(f, links, 24, visitorsPerHour, plain)
				after := heapInUse()
				b.ReportMetric(float64(after-before)/links, "heap-B/link")
				b.ReportMetric(float64(visitBytes(f))/links, "engine-B/link")
				b.ReportMetric(float64(len(snapshotBytes(b, f))-len(unclicked))/links, "snapshot-B/link")
				runtime.KeepAlive(f)
				f.Close()
			}
		})
	}
}

// BenchmarkDiskPerLink reports what the engine holds on disk per link
// for URLs that compress as real ones do, not as benchURL's (which differ
// in a few digits): 200k imported links to 60–90-byte URLs of 5000 hosts,
// with random path tokens. In all, and its records' and targets' tables.
func BenchmarkDiskPerLink(b *testing.B) {
	const linksPerRun = 200_000
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	for range b.N {
		rng := rand.New(rand.NewPCG(1, 2))
		token := func(n int) string {
			t := make([]byte, n)
			for i := range t {
				t[i] = alnum[rng.IntN(len(alnum))]
			}
			return string(t)
		}
		f := onDisk(b)
		applyAll(b, f, InitCommand{Key: testKey}.Encode())
		for start := 0; start < linksPerRun; start += 1000 {
			items := make([]CreateRequest, 0, 1000)
			for i := start; i < start+1000; i++ {
				url := fmt.Sprintf("https://www.site-%d.example.com/%s/%s", rng.IntN(5000), token(8+rng.IntN(10)), token(20+rng.IntN(20)))
				items = append(items, CreateRequest{URL: url, CustomCode: fmt.Sprintf("c%07d", i)})
			}
			applyAll(b, f, create(int64(start), items...))
		}
		b.ReportMetric(float64(tableBytesOnDisk(b, f, nil))/linksPerRun, "engine-B/link")
		b.ReportMetric(float64(tableBytesOnDisk(b, f, []byte{recordPrefix}))/linksPerRun, "records-B/link")
		b.ReportMetric(float64(tableBytesOnDisk(b, f, []byte{targetPrefix}))/linksPerRun, "targets-B/link")
		f.Close()
	}
}

// tableBytesOnDisk is what the keys of f's engine under prefix (nil:
// every table) take on disk once flushed: copied into an engine of their
// own and streamed into a directory as a follower installs the state
// (store.ReadStream: one flush, no compaction); its tables' files only.
// Measured so rather than in f's directory, whose memtables are not yet
// on disk.
func tableBytesOnDisk(tb testing.TB, f *FSM, prefix []byte) int64 {
	tb.Helper()
	src, err := store.Open("", store.Options{InMemory: true, NoLog: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	batch := src.NewBatch()
	defer batch.Close()
	err = f.s.eng.scanCommitted(prefix, nil, func(key, value []byte) bool {
		if key[0] == 0 {
			return true // the store's own keys
		}
		if err := batch.Set(key, value); err != nil {
			tb.Fatal(err)
		}
		if batch.Len() >= loadBatchBytes {
			if err := src.Load(batch); err != nil {
				tb.Fatal(err)
			}
		}
		return true
	})
	if err == nil {
		err = src.Load(batch)
	}
	if err != nil {
		tb.Fatal(err)
	}
	var stream bytes.Buffer
	if _, _, err := src.WriteStream(&stream); err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(tb.TempDir(), "engine")
	if _, err := store.ReadStream(&stream, dir, store.Options{}); err != nil {
		tb.Fatal(err)
	}
	var size int64
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".sst") {
			return err
		}
		info, err := d.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return size
}
