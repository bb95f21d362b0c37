package clicks

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// fakeSender records every batch it is given and fails the sends errs
// names, in order.
type fakeSender struct {
	mu   sync.Mutex
	errs []error
	sent []fsm.ClickBatch
}

func (s *fakeSender) Send(_ context.Context, b fsm.ClickBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b.Counts = slices.Clone(b.Counts)
	s.sent = append(s.sent, b)
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

func (s *fakeSender) batches() []fsm.ClickBatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// appliedSeq is a state machine that applied sequence s for every node.
type appliedSeq uint64

func (s appliedSeq) ClickSeq(string) uint64 { return uint64(s) }

// newCounter is a Counter of node n1 on dir, with its log in the returned
// buffer.
func newCounter(t *testing.T, dir string, send Sender, applied Applied) (*Counter, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	c := New(Config{Node: "n1", Dir: dir, Applied: applied, Sender: send, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	return c, &log
}

func countsOf(b fsm.ClickBatch) map[codeVisitor]uint64 {
	m := map[codeVisitor]uint64{}
	for _, c := range b.Counts {
		m[codeVisitor{c.Code, c.Visitor}] += c.Count
	}
	return m
}

var (
	chromeDE = fsm.Visitor{Referrer: "news.example", Country: [2]byte{'D', 'E'}, Browser: fsm.Chrome, OS: fsm.Windows, Device: fsm.DeviceClassDesktop}
	safariUS = fsm.Visitor{Country: [2]byte{'U', 'S'}, Browser: fsm.Safari, OS: fsm.IOS, Device: fsm.DeviceClassMobile}
	preview  = fsm.Visitor{Bot: fsm.Preview}
)

// errUnknown is a send whose outcome is unknown: the leader was lost.
var errUnknown = errors.New("leader lost")

// Clicks aggregate by code and visitor into one batch of this node,
// sorted by code; a flush with nothing new sends nothing.
func TestFlushSendsCountsOnce(t *testing.T) {
	send := &fakeSender{}
	c, _ := newCounter(t, t.TempDir(), send, appliedSeq(0))
	clicks := []codeVisitor{{"b", chromeDE}, {"a", safariUS}, {"b", chromeDE}, {"a", preview}, {"b", safariUS}, {"b", chromeDE}}
	want := map[codeVisitor]uint64{}
	for _, k := range clicks {
		c.Record(k.code, k.visitor)
		want[k]++
	}
	if got := c.Pending(); got != uint64(len(clicks)) {
		t.Fatalf("Pending = %d, want %d", got, len(clicks))
	}
	for range 2 {
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	sent := send.batches()
	if len(sent) != 1 {
		t.Fatalf("sent %d batches, want 1", len(sent))
	}
	b := sent[0]
	if b.Node != "n1" || !b.Visitors || !maps.Equal(countsOf(b), want) {
		t.Errorf("sent %+v, want node n1 with visitors and counts %v", b, want)
	}
	if !slices.IsSortedFunc(b.Counts, func(x, y fsm.ClickCount) int { return strings.Compare(x.Code, y.Code) }) {
		t.Errorf("counts not sorted by code: %+v", b.Counts)
	}
	if c.Pending() != 0 {
		t.Errorf("Pending = %d after the flush, want 0", c.Pending())
	}
}

// A send whose outcome is unknown keeps its batch, which the next flush
// sends again with the same sequence (exactly once relies on it), and the
// clicks counted since follow in a batch of a higher sequence. A batch the
// leader refuses is dropped, reported and logged; the clicks counted since
// still go.
func TestFailedSend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		resends bool
	}{
		{"outcome unknown", errUnknown, true},
		{"refused", fmt.Errorf("%w: 400 not a click batch", ErrRefused), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send := &fakeSender{errs: []error{tc.err}}
			c, log := newCounter(t, t.TempDir(), send, appliedSeq(0))
			for range 3 {
				c.Record("a", chromeDE)
			}
			if err := c.Flush(context.Background()); !errors.Is(err, tc.err) {
				t.Fatalf("flush = %v, want %v", err, tc.err)
			}
			first := send.batches()[0]
			wantPending := uint64(0)
			if tc.resends {
				wantPending = 3
			}
			if got := c.Pending(); got != wantPending {
				t.Fatalf("Pending = %d after the failed send, want %d", got, wantPending)
			}
			refusalLogged := strings.Contains(log.String(), "leader refused a click batch; dropping it")
			if refusalLogged == tc.resends {
				t.Errorf("refusal logged %v, want %v: %s", refusalLogged, !tc.resends, log)
			}

			c.Record("b", safariUS)
			c.Record("b", safariUS)
			if err := c.Flush(context.Background()); err != nil {
				t.Fatalf("second flush: %v", err)
			}
			want := []fsm.ClickBatch{first}
			if tc.resends {
				want = append(want, first)
			}
			sent := send.batches()
			if len(sent) != len(want)+1 {
				t.Fatalf("sent %d batches, want %d", len(sent), len(want)+1)
			}
			for i, w := range want {
				if sent[i].Seq != w.Seq || !maps.Equal(countsOf(sent[i]), countsOf(w)) {
					t.Errorf("batch %d: seq %d %v, want seq %d %v", i, sent[i].Seq, sent[i].Counts, w.Seq, w.Counts)
				}
			}
			last := sent[len(sent)-1]
			if last.Seq <= first.Seq || !maps.Equal(countsOf(last), map[codeVisitor]uint64{{"b", safariUS}: 2}) {
				t.Errorf("clicks since: seq %d %v, want a seq above %d and b twice", last.Seq, last.Counts, first.Seq)
			}
			if c.Pending() != 0 {
				t.Errorf("Pending = %d, want 0", c.Pending())
			}
		})
	}
}

// A batch's sequence exceeds what the state machine applied for this node
// (more than the wall clock after a wiped data dir, when a restored
// snapshot holds sequences this counter never saw), the wall clock, and
// the batch before it.
func TestSequenceExceedsWhatWasApplied(t *testing.T) {
	ahead := uint64(time.Now().Add(time.Hour).UnixNano())
	for _, tc := range []struct {
		name    string
		applied uint64
	}{
		{"nothing applied", 0},
		{"applied ahead of the clock", ahead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			send := &fakeSender{}
			c, _ := newCounter(t, t.TempDir(), send, appliedSeq(tc.applied))
			start := uint64(time.Now().UnixNano())
			for range 3 {
				c.Record("a", fsm.Visitor{})
				if err := c.Flush(context.Background()); err != nil {
					t.Fatalf("flush: %v", err)
				}
			}
			prev := uint64(0)
			for i, b := range send.batches() {
				if b.Seq <= tc.applied || b.Seq < start || b.Seq <= prev {
					t.Errorf("batch %d: seq %d, want above %d (applied), %d (prev) and at least %d (clock)", i, b.Seq, tc.applied, prev, start)
				}
				prev = b.Seq
			}
		})
	}
}

// A stop saves the batch with an unknown outcome and the unsent counts; a
// restart (a new Counter on the same dir) sends the batch first with its
// own sequence, then the counts in a batch of a higher one, and removes
// the file once both are in.
func TestSaveAndRestore(t *testing.T) {
	dir := t.TempDir()
	before := &fakeSender{errs: []error{errUnknown}}
	c, _ := newCounter(t, dir, before, appliedSeq(0))
	for range 3 {
		c.Record("a", chromeDE)
	}
	if err := c.Flush(context.Background()); err == nil {
		t.Fatal("flush succeeded; the sender fails it")
	}
	c.Record("b", preview)
	c.Record("b", preview)
	if err := c.Save(); err != nil {
		t.Fatalf("save: %v", err)
	}
	inFlight := before.batches()[0]

	after := &fakeSender{}
	restarted, _ := newCounter(t, dir, after, appliedSeq(0))
	if got := restarted.Pending(); got != 5 {
		t.Fatalf("Pending after the restart = %d, want 5", got)
	}
	if err := restarted.Flush(context.Background()); err != nil {
		t.Fatalf("flush after the restart: %v", err)
	}
	sent := after.batches()
	if len(sent) != 2 {
		t.Fatalf("sent %d batches, want 2", len(sent))
	}
	if sent[0].Seq != inFlight.Seq || !maps.Equal(countsOf(sent[0]), countsOf(inFlight)) {
		t.Errorf("first batch: seq %d %v, want the saved one: seq %d %v", sent[0].Seq, sent[0].Counts, inFlight.Seq, inFlight.Counts)
	}
	if sent[1].Seq <= inFlight.Seq || !maps.Equal(countsOf(sent[1]), map[codeVisitor]uint64{{"b", preview}: 2}) {
		t.Errorf("second batch: seq %d %v, want a seq above %d and b twice", sent[1].Seq, sent[1].Counts, inFlight.Seq)
	}
	if _, err := os.Stat(filepath.Join(dir, pendingClicksFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the clicks file is still there once its clicks are in (stat: %v)", err)
	}
}

// A stop with nothing unsent leaves no file.
func TestSaveWithNothingUnsent(t *testing.T) {
	dir := t.TempDir()
	c, _ := newCounter(t, dir, &fakeSender{}, appliedSeq(0))
	if err := c.Save(); err != nil {
		t.Fatalf("save: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, pendingClicksFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a stop with no clicks left a file (stat: %v)", err)
	}
}

// savedByEarlierBuild are clicks files as builds before this package wrote
// them: a node upgraded in place must still send what they hold.
var savedByEarlierBuild = []struct {
	name    string
	file    string // hex
	pending fsm.ClickBatch
	counts  map[codeVisitor]uint64
}{
	{
		name: "a batch with visitors and counts",
		file: "3c90026e31818091c2a7f3d5bd1880a4eec8d7660203616263030c6e6577732e6578616d706c654445010101000361626301000000000000027027b9581590000000010378797a0200555302040200da1ee53b",
		pending: fsm.ClickBatch{Node: "n1", Seq: 1764100000000000001, Now: 1764100000000, Visitors: true, Counts: []fsm.ClickCount{
			{Code: "abc", Count: 3, Visitor: chromeDE}, {Code: "abc", Count: 1, Visitor: preview},
		}},
		counts: map[codeVisitor]uint64{{"xyz", safariUS}: 2},
	},
	{
		name: "a batch without visitors",
		file: "1d84026e31818091c2a7f3d5bd1880a4eec8d766010361626303951a3f4a00",
		pending: fsm.ClickBatch{Node: "n1", Seq: 1764100000000000001, Now: 1764100000000, Counts: []fsm.ClickCount{
			{Code: "abc", Count: 3},
		}},
	},
}

func TestRestoreReadsEarlierBuildsFile(t *testing.T) {
	for _, tc := range savedByEarlierBuild {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data, err := hex.DecodeString(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, pendingClicksFile), data, 0o600); err != nil {
				t.Fatal(err)
			}
			send := &fakeSender{}
			c, _ := newCounter(t, dir, send, appliedSeq(0))
			if err := c.Flush(context.Background()); err != nil {
				t.Fatalf("flush: %v", err)
			}
			sent := send.batches()
			if len(sent) == 0 || sent[0].Seq != tc.pending.Seq || sent[0].Visitors != tc.pending.Visitors ||
				!maps.Equal(countsOf(sent[0]), countsOf(tc.pending)) {
				t.Fatalf("sent %+v, want first %+v", sent, tc.pending)
			}
			var rest map[codeVisitor]uint64
			if len(sent) > 1 {
				rest = countsOf(sent[1])
			}
			if len(sent) > 2 || !maps.Equal(rest, tc.counts) {
				t.Errorf("after the saved batch sent %+v, want the counts %v", sent[1:], tc.counts)
			}
		})
	}
}

// A damaged clicks file is set aside as .damaged and logged; the node
// starts with no saved clicks and counts on.
func TestRestoreSetsADamagedFileAside(t *testing.T) {
	valid, err := hex.DecodeString(savedByEarlierBuild[0].file)
	if err != nil {
		t.Fatal(err)
	}
	checksumOff := slices.Clone(valid)
	checksumOff[10] ^= 0xff
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"cut short", valid[:len(valid)/2]},
		{"a flipped byte", checksumOff},
		{"not a click batch", []byte("\x05hello\x00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, pendingClicksFile)
			if err := os.WriteFile(path, tc.file, 0o600); err != nil {
				t.Fatal(err)
			}
			send := &fakeSender{}
			c, log := newCounter(t, dir, send, appliedSeq(0))
			if c.Pending() != 0 || !strings.Contains(log.String(), "the clicks saved by the last stop are lost") {
				t.Errorf("Pending = %d, log %q: want 0 and the loss logged", c.Pending(), log)
			}
			if kept, err := os.ReadFile(path + ".damaged"); err != nil || !bytes.Equal(kept, tc.file) {
				t.Errorf("the damaged file was not set aside whole (read: %v)", err)
			}
			c.Record("a", fsm.Visitor{})
			if err := c.Flush(context.Background()); err != nil || len(send.batches()) != 1 {
				t.Errorf("flush after the damage: %v, %d batches sent, want 1", err, len(send.batches()))
			}
		})
	}
}

// A batch holds at most maxBatchCounts code and visitor pairs; a flush
// sends at most two batches, and what is left waits for the next flush.
func TestBatchesHoldAtMostMaxBatchCounts(t *testing.T) {
	send := &fakeSender{}
	c, _ := newCounter(t, t.TempDir(), send, appliedSeq(0))
	const pairs = 2*maxBatchCounts + 5
	for i := range pairs {
		c.Record(fmt.Sprintf("c%06d", i), fsm.Visitor{})
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if got := len(send.batches()); got != 2 {
		t.Fatalf("one flush sent %d batches, want 2", got)
	}
	if got := c.Pending(); got != 5 {
		t.Fatalf("Pending after one flush = %d, want 5", got)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Fatalf("second flush: %v", err)
	}
	seen := map[codeVisitor]uint64{}
	prev := uint64(0)
	for i, b := range send.batches() {
		if len(b.Counts) > maxBatchCounts || b.Seq <= prev {
			t.Errorf("batch %d: %d counts, seq %d after %d", i, len(b.Counts), b.Seq, prev)
		}
		prev = b.Seq
		for k, n := range countsOf(b) {
			seen[k] += n
		}
	}
	if len(seen) != pairs {
		t.Errorf("sent %d pairs, want %d", len(seen), pairs)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%v sent %d times, want once", k, n)
		}
	}
}

// Run flushes on its interval and returns when its context ends.
func TestRunFlushesUntilCancelled(t *testing.T) {
	send := &fakeSender{}
	c := New(Config{Node: "n1", Dir: t.TempDir(), Applied: appliedSeq(0), Sender: send,
		FlushTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Run(ctx, time.Millisecond)
		close(done)
	}()
	c.Record("a", fsm.Visitor{})
	for deadline := time.Now().Add(5 * time.Second); len(send.batches()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Run did not flush")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
}
