package backups

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	clusterA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	clusterB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// state is a Source whose backup is its content and a tag only it makes
// (the node's is an HMAC under the cluster key): equal content, equal
// bytes, as the node's.
type state struct {
	cluster string
	index   uint64
	content string
	fail    error
}

func (s *state) ClusterID() string    { return s.cluster }
func (s *state) AppliedIndex() uint64 { return s.index }
func (s *state) WriteBackup(w io.Writer) error {
	if s.fail != nil {
		return s.fail
	}
	_, err := io.WriteString(w, backupBytes(s.content))
	return err
}

// CheckBackup accepts what WriteBackup wrote, of any content.
func (s *state) CheckBackup(r io.Reader) error {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return err
	}
	content, tag, ok := strings.Cut(strings.TrimPrefix(string(data), "LKRB"), "~")
	if !ok || !strings.HasPrefix(string(data), "LKRB") || tag != tagOf(content) {
		return errors.New("not authenticated")
	}
	return nil
}

// backupBytes is what the state writes for content.
func backupBytes(content string) string { return "LKRB" + content + "~" + tagOf(content) }

func tagOf(content string) string {
	sum := sha256.Sum256([]byte("the cluster key" + content))
	return hex.EncodeToString(sum[:8])
}

// clock is a test's time, moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// brokenStore is a destination that cannot be reached.
type brokenStore struct{ Dir }

func (brokenStore) List(context.Context) ([]string, error) {
	return nil, errors.New("connection refused")
}

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func newTestScheduler(t *testing.T, store Store, src Source, c *clock, retain int) *Scheduler {
	t.Helper()
	return New(Config{Store: store, Source: src, Interval: time.Hour, Retain: retain, SpoolDir: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler), Now: c.now})
}

// backupsIn is what the directory holds, parsed and newest first.
func backupsIn(t *testing.T, d Dir, cluster string) []Name {
	t.Helper()
	names, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return newestFirst(names, cluster)
}

// TestSchedulerSteps: each step moves the clock or the state, runs one
// due check, and says what the destination then holds and when the next
// check is.
func TestSchedulerSteps(t *testing.T) {
	type step struct {
		after   time.Duration // clock moved by this before the check
		index   uint64        // the state's applied index (0: unchanged)
		content string        // the state's content ("": unchanged)
		outcome string        // the check's outcome ("": none, not due)
		backups int           // this cluster's backups at the destination after it
		next    time.Duration // the next check, from the clock at this step
	}
	for _, tc := range []struct {
		name   string
		retain int
		steps  []step
	}{
		{"first backup at once, then one per interval", 3, []step{
			{0, 10, "one link", OutcomeWritten, 1, time.Hour},
			{time.Hour, 20, "two links", OutcomeWritten, 2, time.Hour},
		}},
		{"nothing applied since: skipped, nothing written", 3, []step{
			{0, 10, "one link", OutcomeWritten, 1, time.Hour},
			{time.Hour, 0, "", OutcomeSkipped, 1, time.Hour},
			{time.Hour, 0, "", OutcomeSkipped, 1, time.Hour},
		}},
		{"entries applied that changed nothing (a new leader's): skipped by the hash", 3, []step{
			{0, 10, "one link", OutcomeWritten, 1, time.Hour},
			{time.Hour, 12, "", OutcomeSkipped, 1, time.Hour},
		}},
		{"a check before the newest backup's interval ends waits for it", 3, []step{
			{0, 10, "one link", OutcomeWritten, 1, time.Hour},
			{20 * time.Minute, 20, "two links", "", 1, 40 * time.Minute},
			{40 * time.Minute, 0, "", OutcomeWritten, 2, time.Hour},
		}},
		{"retention keeps the newest", 2, []step{
			{0, 10, "a", OutcomeWritten, 1, time.Hour},
			{time.Hour, 20, "b", OutcomeWritten, 2, time.Hour},
			{time.Hour, 30, "c", OutcomeWritten, 2, time.Hour},
			{time.Hour, 40, "d", OutcomeWritten, 2, time.Hour},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := Dir{Path: filepath.Join(t.TempDir(), "backups")}
			// Another cluster's backup in the same place is left alone.
			other := Name{Cluster: clusterB, Time: t0.Add(-48 * time.Hour), Index: 1, Hash: "0123456789abcdef"}
			if err := dir.Put(context.Background(), other.String(), strings.NewReader("x"), 1); err != nil {
				t.Fatal(err)
			}
			c := &clock{t0}
			src := &state{cluster: clusterA}
			s := newTestScheduler(t, dir, src, c, tc.retain)
			var lastContent string
			for i, st := range tc.steps {
				c.t = c.t.Add(st.after)
				if st.index != 0 {
					src.index = st.index
				}
				if st.content != "" {
					src.content = st.content
					lastContent = st.content
				}
				before := s.Status()
				next := s.tick(context.Background())
				after := s.Status()
				outcome := after.Outcome
				if after.At == before.At {
					outcome = ""
				}
				if outcome != st.outcome {
					t.Fatalf("step %d: outcome %q, want %q (err %s)", i, outcome, st.outcome, after.Err)
				}
				mine := backupsIn(t, dir, clusterA)
				if len(mine) != st.backups {
					t.Fatalf("step %d: %d backups at the destination, want %d: %v", i, len(mine), st.backups, mine)
				}
				if got := next.Sub(c.t); got != st.next {
					t.Fatalf("step %d: next check in %v, want %v", i, got, st.next)
				}
			}
			mine := backupsIn(t, dir, clusterA)
			newest, err := readAll(dir, mine[0].String())
			if err != nil || newest != backupBytes(lastContent) {
				t.Fatalf("newest backup holds %q (%v), want the last state %q", newest, err, lastContent)
			}
			if got := backupsIn(t, dir, clusterB); len(got) != 1 {
				t.Fatalf("another cluster's backups: %v, want its one left alone", got)
			}
		})
	}
}

// TestSchedulerLeaderChange: a new leader's scheduler reads the newest
// backup from the destination: it writes nothing within the interval the
// old leader's backup covers and writes the next one when it is due.
func TestSchedulerLeaderChange(t *testing.T) {
	dir := Dir{Path: t.TempDir()}
	c := &clock{t0}
	src := &state{cluster: clusterA, index: 10, content: "one"}
	old := newTestScheduler(t, dir, src, c, 5)
	old.tick(context.Background())

	c.t = t0.Add(45 * time.Minute)
	src.index, src.content = 11, "two"
	leader := newTestScheduler(t, dir, src, c, 5)
	next := leader.tick(context.Background())
	if n := len(backupsIn(t, dir, clusterA)); n != 1 || !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("new leader within the interval: %d backups, next check %v; want 1 and %v", n, next, t0.Add(time.Hour))
	}
	c.t = next
	leader.tick(context.Background())
	if got := backupsIn(t, dir, clusterA); len(got) != 2 || !got[0].Time.Equal(t0.Add(time.Hour)) {
		t.Fatalf("at the due time: %v; want a second backup at %v", got, t0.Add(time.Hour))
	}
}

// fullStore is a destination that lists but takes no backup.
type fullStore struct{ Dir }

func (fullStore) Put(context.Context, string, io.ReadSeeker, int64) error {
	return errors.New("no space left on device")
}

// TestSchedulerOverdue: /health's backup_overdue: a destination that
// cannot be reached, or takes no backup, makes the backup overdue after
// two intervals, whatever names it holds; a good backup ends it, and a
// node that does not lead never says it.
func TestSchedulerOverdue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) Store
		says  string
	}{
		{"unreachable", func(t *testing.T) Store { return brokenStore{Dir{Path: t.TempDir()}} }, "connection refused"},
		{"full, holding a backup's name dated in 2099", func(t *testing.T) Store {
			d := Dir{Path: t.TempDir()}
			plant(t, d, clusterA, t0.AddDate(73, 0, 0), "junk", false)
			plant(t, d, clusterA, t0.AddDate(73, 0, 1), backupBytes("x"), false)
			return fullStore{d}
		}, "no space left on device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t0}
			src := &state{cluster: clusterA, index: 1, content: "x"}
			s := newTestScheduler(t, tc.store(t), src, c, 3)
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			cancel()
			go func() { s.Run(ctx); close(ran) }() // marks it active, then ends at once
			<-ran
			if s.Overdue() {
				t.Fatal("overdue on a node that does not run the backups")
			}
			s.st.Active, s.st.LastGood = true, t0

			for i, step := range []struct {
				after   time.Duration
				overdue bool
			}{{0, false}, {time.Hour, false}, {time.Hour, false}, {time.Minute, true}} {
				c.t = c.t.Add(step.after)
				s.tick(context.Background())
				if st := s.Status(); st.Outcome != OutcomeFailed || !strings.Contains(st.Err, tc.says) {
					t.Fatalf("check %d: %+v; want a failure that says why", i, st)
				}
				if s.Overdue() != step.overdue {
					t.Fatalf("check %d, %v after the start: overdue %v, want %v", i, c.t.Sub(t0), s.Overdue(), step.overdue)
				}
				if lg := s.Status().LastGood; !lg.Equal(t0) {
					t.Fatalf("check %d: last good backup %v, want %v (when it began to lead)", i, lg, t0)
				}
			}
			s.cfg.Store = Dir{Path: t.TempDir()}
			s.tick(context.Background())
			if s.Overdue() || s.Status().Outcome != OutcomeWritten {
				t.Fatalf("after a good backup: overdue %v, %+v", s.Overdue(), s.Status())
			}
		})
	}
}

// plant stores data under a backup's name of cluster, as anyone who may
// write to the destination can, without the cluster key: the name records
// data's own hash, or another (damage) when badSum.
func plant(t *testing.T, d Dir, cluster string, at time.Time, data string, badSum bool) Name {
	t.Helper()
	sum := sha256.Sum256([]byte(data))
	n := Name{Cluster: cluster, Time: at, Index: 7, Hash: hex.EncodeToString(sum[:8])}
	if badSum {
		n.Hash = "0123456789abcdef"
	}
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, n.String()), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSchedulerTrustsOnlyWhatItChecked: an old leader wrote a backup at
// t0; then someone without the cluster key put objects named as backups
// at the destination; a new leader checks when its clock says. Objects
// dated in the future, damaged, not authenticated or of another cluster
// never count: not for the due time, not for the last good backup, not for
// retention; and only this cluster's are ever deleted.
func TestSchedulerTrustsOnlyWhatItChecked(t *testing.T) {
	type object struct {
		cluster string
		at      time.Duration // from t0
		kind    string        // "junk" (checksum right, not authenticated), "damaged" (checksum wrong), "copy" (the genuine backup's bytes)
	}
	const year = 365 * 24 * time.Hour
	for _, tc := range []struct {
		name     string
		oldAt    time.Duration // the old leader's clock when it wrote the genuine backup, from t0
		retain   int
		planted  []object
		at       time.Duration // the new leader's check, from t0
		written  bool          // it writes a backup at once
		next     time.Duration // its next check, from its own
		lastGood time.Duration // the last good backup it then reports, from t0
		genuine  bool          // the old leader's backup is still there
	}{
		{"junk dated in 2099 stops no backup", 0, 3, []object{{clusterA, 73 * year, "junk"}},
			time.Hour, true, time.Hour, time.Hour, true},
		{"the genuine backup copied to a name in 2099 stops no backup", 0, 3, []object{{clusterA, 73 * year, "copy"}},
			time.Hour, true, time.Hour, time.Hour, true},
		{"junk named seconds ahead is not kept in place of the genuine backup", 0, 2,
			[]object{{clusterA, time.Hour + 5*time.Second, "junk"}, {clusterA, time.Hour + 6*time.Second, "junk"},
				{clusterA, time.Hour + 7*time.Second, "junk"}},
			time.Hour, true, time.Hour, time.Hour, true},
		{"junk named seconds after the genuine backup does not displace it in retention", 0, 2,
			[]object{{clusterA, time.Second, "junk"}, {clusterA, 2 * time.Second, "junk"}, {clusterA, 3 * time.Second, "junk"}},
			time.Hour + 3*time.Second, true, time.Hour, time.Hour + 3*time.Second, true},
		{"junk dated since the newest backup neither delays the next nor displaces the genuine one", 0, 2,
			[]object{{clusterA, 30 * time.Minute, "junk"}, {clusterA, 31 * time.Minute, "junk"}, {clusterA, 32 * time.Minute, "junk"}},
			time.Hour, true, time.Hour, time.Hour, true},
		{"damaged or forged backups of this cluster are not the last good one", 0, 3,
			[]object{{clusterA, 30 * time.Minute, "damaged"}, {clusterA, 40 * time.Minute, "junk"}},
			45 * time.Minute, false, 15 * time.Minute, 0, true},
		{"another cluster's objects count for nothing and stay", 0, 1,
			[]object{{clusterB, 30 * time.Minute, "copy"}, {clusterB, 73 * year, "junk"}, {clusterB, -48 * time.Hour, "junk"},
				{clusterB, 59 * time.Minute, "damaged"}},
			time.Hour, true, time.Hour, time.Hour, false},
		{"a backup of a leader whose clock runs seconds ahead counts, but not as good in the future", 10 * time.Second, 3, nil,
			5 * time.Second, false, time.Hour + 5*time.Second, 5 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := Dir{Path: filepath.Join(t.TempDir(), "backups")}
			c := &clock{t0.Add(tc.oldAt)}
			src := &state{cluster: clusterA, index: 10, content: "genuine"}
			newTestScheduler(t, dir, src, c, tc.retain).tick(context.Background())
			genuine := backupsIn(t, dir, clusterA)
			if len(genuine) != 1 {
				t.Fatalf("the old leader's backup: %v", genuine)
			}
			var others []Name
			for i, o := range tc.planted {
				data := fmt.Sprintf("not a backup %d", i)
				if o.kind == "copy" {
					data = backupBytes("genuine")
				}
				n := plant(t, dir, o.cluster, t0.Add(o.at), data, o.kind == "damaged")
				if o.cluster != clusterA {
					others = append(others, n)
				}
			}

			c.t = t0.Add(tc.at)
			src.index, src.content = 11, "changed"
			leader := newTestScheduler(t, dir, src, c, tc.retain)
			next := leader.tick(context.Background())
			st := leader.Status()
			if written := st.Outcome == OutcomeWritten; written != tc.written {
				t.Fatalf("written %v, want %v (status %+v)", written, tc.written, st)
			}
			if got := next.Sub(c.t); got != tc.next {
				t.Errorf("next check in %v, want %v", got, tc.next)
			}
			if want := t0.Add(tc.lastGood); !st.LastGood.Equal(want) {
				t.Errorf("last good backup %v, want %v", st.LastGood, want)
			}
			names, err := dir.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if kept := slices.Contains(names, genuine[0].String()); kept != tc.genuine {
				t.Errorf("the genuine backup kept %v, want %v; the destination holds %v", kept, tc.genuine, names)
			}
			if tc.written {
				written := Name{Cluster: clusterA, Time: c.t, Index: 11, Hash: hashOf(backupBytes("changed"))}
				if !slices.Contains(names, written.String()) {
					t.Errorf("the backup written is not kept; the destination holds %v", names)
				}
			}
			for _, n := range others {
				if !slices.Contains(names, n.String()) {
					t.Errorf("another cluster's %s was deleted", n)
				}
			}
		})
	}
}

// readAll is an object's bytes.
func readAll(store Store, name string) (string, error) {
	body, err := store.Get(context.Background(), name)
	if err != nil {
		return "", err
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	return string(data), err
}

func hashOf(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:8])
}

// TestSchedulerFailedBackupLeavesNothing: a backup that fails while it is
// taken leaves no object and no spool file, and is tried again soon.
func TestSchedulerFailedBackupLeavesNothing(t *testing.T) {
	dir := Dir{Path: t.TempDir()}
	c := &clock{t0}
	src := &state{cluster: clusterA, index: 1, fail: errors.New("disk full")}
	s := newTestScheduler(t, dir, src, c, 3)
	next := s.tick(context.Background())
	if st := s.Status(); st.Outcome != OutcomeFailed || !strings.Contains(st.Err, "disk full") {
		t.Fatalf("status %+v", st)
	}
	if names, _ := dir.List(context.Background()); len(names) != 0 {
		t.Fatalf("destination holds %v", names)
	}
	if spooled, _ := os.ReadDir(s.cfg.SpoolDir); len(spooled) != 0 {
		t.Fatalf("spool dir holds %v", spooled)
	}
	if next.Sub(c.t) != retryAfter {
		t.Fatalf("retried after %v, want %v", next.Sub(c.t), retryAfter)
	}
}

func TestNames(t *testing.T) {
	n := Name{Cluster: clusterA, Time: time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC), Index: 42, Hash: "0123456789abcdef"}
	got, ok := ParseName(n.String())
	if !ok || got != n {
		t.Fatalf("ParseName(%s) = %+v, %v", n, got, ok)
	}
	for _, bad := range []string{"", "linkraft.backup", n.String() + ".tmp", strings.Replace(n.String(), "-42-", "-x-", 1)} {
		if _, ok := ParseName(bad); ok {
			t.Errorf("ParseName(%q) accepted", bad)
		}
	}
	var names []string
	for i := range 3 {
		names = append(names, Name{Cluster: clusterA, Time: t0.Add(time.Duration(i) * time.Hour), Index: uint64(i), Hash: "0123456789abcdef"}.String())
	}
	slices.Reverse(names)
	names = append(names, "README", fmt.Sprintf("linkraft-%s-20260101T000000.000Z-1-0123456789abcdef.lkrb", clusterB))
	if got := newestFirst(names, clusterA); len(got) != 3 || got[0].Index != 2 || got[2].Index != 0 {
		t.Fatalf("newestFirst = %v", got)
	}
	if got := newestFirst(names, ""); len(got) != 4 || got[3].Cluster != clusterB {
		t.Fatalf("newestFirst of any cluster = %v", got)
	}
}
