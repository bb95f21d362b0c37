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
	"sync"
	"time"
)

// Source is what a backup is taken of: the cluster's node.
type Source interface {
	// ClusterID is the state's cluster id, "" until the cluster has one.
	ClusterID() string
	// AppliedIndex is the last log index applied to the state.
	AppliedIndex() uint64
	// WriteBackup writes a compressed, authenticated backup of the whole
	// state; equal states give equal bytes.
	WriteBackup(w io.Writer) error
	// CheckBackup reads a backup through once, holding little of it, and
	// returns nil when this cluster made it (it authenticates under the
	// cluster key), else why not.
	CheckBackup(r io.Reader) error
}

// Config is what a Scheduler needs.
type Config struct {
	Store  Store
	Source Source
	// Interval is how often a backup is due; Retain how many of this
	// cluster's backups are kept at the destination (at least 1).
	Interval time.Duration
	Retain   int
	// SpoolDir holds a backup while it is stored (the data dir: it is
	// owner-only, as a backup must be); "" is the system's temp dir.
	SpoolDir string
	Logger   *slog.Logger
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Outcomes of a due backup, as /metrics reports them.
const (
	OutcomeWritten = "written" // a new backup is at the destination
	OutcomeSkipped = "skipped" // nothing changed since the newest backup there
	OutcomeFailed  = "failed"
)

// retryAfter is how soon a failed backup is tried again (at most the
// interval): a destination that was down for a moment must not cost a
// whole interval.
const retryAfter = time.Minute

// maxClockSkew is how far in the future a backup's name may be dated and
// still count: the clocks of successive leaders differ (by milliseconds
// where NTP keeps them; a minute leaves room for one drifting before it is
// corrected). A name's time is not authenticated (the MAC covers the
// bytes), so a genuine backup copied under a later name counts as one of
// then: the skew is how long that can put off the next backup, and so it
// is at most a quarter of the interval. A backup of a leader whose clock
// ran further ahead is passed over, and costs one backup more.
const maxClockSkew = time.Minute

// maxChecks bounds how many objects one due check reads to find the
// newest good backup: each is read once (the outcome is kept), so junk
// dated after the newest backup costs a read each, spread over checks,
// never a check that does not end. When none passes within it, the backup
// is taken as due.
const maxChecks = 4

// Scheduler writes the backups while this node leads (Run) and says how
// the last ones went (Status, Overdue, the collectors).
type Scheduler struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	mu sync.Mutex
	st Status

	// checking serialises the due checks and guards checked.
	checking sync.Mutex
	// checked holds what this scheduler knows of this cluster's objects
	// by name: true for a good backup (it wrote it, or it read it and
	// both its checksum and its authentication held), false for one that
	// is not. Only the names of the last listing are kept.
	checked map[string]bool
}

// Status is what the scheduler knows of its backups.
type Status struct {
	// Active is true while this node runs the scheduler (it leads).
	Active bool
	// LastGood is the last time the destination was known to hold the
	// state: a backup written, found fresh enough or found unchanged; at
	// first, when this node began to lead.
	LastGood time.Time
	// Last is the last due backup's outcome, when it ended, how long it
	// took, its size (written ones) and its error (failed ones).
	Outcome  string
	At       time.Time
	Duration time.Duration
	Size     int64
	Err      string
}

// New makes a scheduler; it does nothing until Run.
func New(cfg Config) *Scheduler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Retain = max(cfg.Retain, 1)
	return &Scheduler{cfg: cfg, log: cfg.Logger.With("component", "backups", "to", cfg.Store.String()), m: newMetrics(),
		checked: map[string]bool{}}
}

// Interval is how often a backup is due.
func (s *Scheduler) Interval() time.Duration { return s.cfg.Interval }

// Status is a copy of what the scheduler knows.
func (s *Scheduler) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// Overdue reports whether this node runs the backups and two intervals
// passed without a good one. Only the leader writes backups, so only its
// answer means anything; a follower's is false.
func (s *Scheduler) Overdue() bool {
	st := s.Status()
	return st.Active && s.cfg.Now().Sub(st.LastGood) > 2*s.cfg.Interval
}

// Run writes the backups until ctx ends (leadership, or the node stops):
// the leader loop runs it as one of its duties. Each backup is due an
// interval after the newest one at the destination, so a new leader
// neither writes the interval's backup again nor skips it.
func (s *Scheduler) Run(ctx context.Context) {
	s.mu.Lock()
	s.st.Active, s.st.LastGood = true, s.cfg.Now()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.st.Active = false
		s.mu.Unlock()
	}()
	for {
		next := s.tick(ctx)
		wait := time.NewTimer(max(next.Sub(s.cfg.Now()), 0))
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
	}
}

// tick looks at the destination and writes the backup if it is due. It
// returns when to look again.
//
// Only what it checked counts: this cluster's objects dated no later than
// now (but for the clock skew), and of those only good backups (checked).
// Anyone who may write to the destination can put objects there under any
// name; none of them makes a backup seem due later, or the state seem
// kept, or another backup deleted.
func (s *Scheduler) tick(ctx context.Context) (next time.Time) {
	s.checking.Lock()
	defer s.checking.Unlock()
	start := s.cfg.Now()
	retry := start.Add(min(s.cfg.Interval, retryAfter))
	cluster := s.cfg.Source.ClusterID()
	if cluster == "" {
		return retry // not initialised yet: no state to keep
	}
	names, err := s.cfg.Store.List(ctx)
	if err != nil {
		s.failed(start, fmt.Errorf("list %s: %w", s.cfg.Store, err))
		return retry
	}
	mine := s.current(names, cluster, start)
	newest, found := s.newestGood(ctx, mine)
	if found {
		if due := newest.Time.Add(s.cfg.Interval); start.Before(due) {
			// A leader's clock ahead of this one's dates its backup
			// later than now; the state was not kept in the future.
			s.goodAt(earlier(newest.Time, start))
			return due
		}
	}
	index := s.cfg.Source.AppliedIndex()
	if found && newest.Index == index {
		s.skipped(start, newest)
		return start.Add(s.cfg.Interval)
	}
	spool, size, hash, err := s.spool()
	if err != nil {
		s.failed(start, err)
		return retry
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	if found && hash == newest.Hash {
		s.skipped(start, newest)
		return start.Add(s.cfg.Interval)
	}
	name := Name{Cluster: cluster, Time: start, Index: index, Hash: hash}
	if err := s.cfg.Store.Put(ctx, name.String(), spool, size); err != nil {
		s.failed(start, fmt.Errorf("store %s in %s: %w", name, s.cfg.Store, err))
		return retry
	}
	s.checked[name.String()] = true
	s.written(start, name, size)
	s.prune(ctx, s.current(append(names, name.String()), cluster, start))
	return start.Add(s.cfg.Interval)
}

// current are cluster's objects among names dated no later than now (but
// for the clock skew), newest first. What is known of names no longer
// listed is forgotten, so that knowledge stays as large as one listing.
func (s *Scheduler) current(names []string, cluster string, now time.Time) []Name {
	listed := make(map[string]bool, len(names))
	for _, n := range names {
		listed[n] = true
	}
	for n := range s.checked {
		if !listed[n] {
			delete(s.checked, n)
		}
	}
	latest := now.Add(min(maxClockSkew, s.cfg.Interval/4))
	var out []Name
	for _, n := range newestFirst(names, cluster) {
		if !n.Time.After(latest) {
			out = append(out, n)
		}
	}
	return out
}

// newestGood is the newest good backup of mine (newest first), reading
// at most maxChecks objects not checked before. found is false when none
// is known good: the backup is then due.
func (s *Scheduler) newestGood(ctx context.Context, mine []Name) (newest Name, found bool) {
	reads := 0
	for _, n := range mine {
		good, known := s.checked[n.String()]
		if !known {
			if reads == maxChecks {
				s.log.Warn("objects named as backups of this cluster are still unchecked; backing up as if none were there",
					"checked", maxChecks)
				return Name{}, false
			}
			reads++
			good, known = s.check(ctx, n)
		}
		if known && good {
			return n, true
		}
	}
	return Name{}, false
}

// check reads the object n once: its bytes against its name's hash, and
// its authentication (the Source). known is false when it could not be
// read (the destination failed, or it is gone): it is passed over now and
// read again later. What is known is kept.
func (s *Scheduler) check(ctx context.Context, n Name) (good, known bool) {
	body, err := s.cfg.Store.Get(ctx, n.String())
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			s.log.Warn("a backup could not be read to check it; passed over for now", "name", n.String(), "err", err)
		}
		return false, false
	}
	defer body.Close()
	read := &reader{r: body}
	sum := sha256.New()
	tee := io.TeeReader(read, sum)
	why := s.cfg.Source.CheckBackup(tee)
	if why == nil && read.err == nil {
		_, _ = io.Copy(io.Discard, tee) // the rest, for the hash; a refused one need not be read on
	}
	if read.err != nil {
		s.log.Warn("a backup could not be read to check it; passed over for now", "name", n.String(), "err", read.err)
		return false, false
	}
	if got := hex.EncodeToString(sum.Sum(nil))[:16]; got != n.Hash {
		why = fmt.Errorf("%w: its SHA-256 is %s…", ErrChecksum, got)
	}
	good = why == nil
	if !good {
		s.log.Warn("an object named as a backup of this cluster is not one: it counts for nothing", "name", n.String(), "why", why)
	}
	s.checked[n.String()] = good
	return good, true
}

// prune deletes this cluster's objects older than its Retain newest good
// backups (mine, newest first, holds them). Only good backups count, and
// only those this scheduler knows good: it reads none for this, so an
// object it has not checked is neither counted nor deleted while it is
// among them (a new leader's predecessors' backups are deleted once it
// has written Retain of its own). So no object put there by someone else
// pushes a good backup out, and none newer than the newest good one is
// ever deleted. Objects dated in the future are never listed in mine. A
// failure is logged: the backup itself was written.
func (s *Scheduler) prune(ctx context.Context, mine []Name) {
	good, cut := 0, len(mine)
	for i, n := range mine {
		if s.checked[n.String()] {
			good++
		}
		if good == s.cfg.Retain {
			cut = i + 1
			break
		}
	}
	var errs []error
	for _, old := range mine[cut:] {
		if err := s.cfg.Store.Delete(ctx, old.String()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete %s: %w", old, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("old backups not deleted; they are deleted after the next backup", "err", err)
	}
}

// spool writes a backup to a file (never held whole in memory) and hashes
// it as it goes. The caller removes the file.
func (s *Scheduler) spool() (f *os.File, size int64, hash string, err error) {
	f, err = os.CreateTemp(s.cfg.SpoolDir, "backup-*.tmp")
	if err != nil {
		return nil, 0, "", fmt.Errorf("spool backup: %w", err)
	}
	sum := sha256.New()
	counted := &counter{w: io.MultiWriter(f, sum)}
	if err = s.cfg.Source.WriteBackup(counted); err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, "", fmt.Errorf("spool backup: %w", err)
	}
	return f, counted.n, hex.EncodeToString(sum.Sum(nil))[:16], nil
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (s *Scheduler) goodAt(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.After(s.st.LastGood) {
		s.st.LastGood = t
	}
	s.m.lastGood.WithLabelValues().Set(float64(t.UnixMilli()) / 1000)
}

func (s *Scheduler) record(start time.Time, outcome string, size int64, err error) {
	end := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Outcome, s.st.At, s.st.Duration, s.st.Err = outcome, end, end.Sub(start), ""
	if outcome != OutcomeFailed {
		s.st.LastGood = end
	}
	if outcome == OutcomeWritten {
		s.st.Size = size
	}
	if err != nil {
		s.st.Err = err.Error()
	}
	s.m.observe(s.st, outcome)
}

func (s *Scheduler) written(start time.Time, name Name, size int64) {
	s.record(start, OutcomeWritten, size, nil)
	s.log.Info("backup written", "name", name.String(), "bytes", size, "index", name.Index, "took", s.cfg.Now().Sub(start))
}

func (s *Scheduler) skipped(start time.Time, newest Name) {
	s.record(start, OutcomeSkipped, 0, nil)
	s.log.Debug("backup skipped: nothing changed since the newest one", "newest", newest.String())
}

func (s *Scheduler) failed(start time.Time, err error) {
	s.record(start, OutcomeFailed, 0, err)
	s.log.Warn("backup failed; will retry", "err", err)
}

// reader keeps the first error of r that is not its end: a read that
// failed is told from a backup refused.
type reader struct {
	r   io.Reader
	err error
}

func (r *reader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// counter counts what passes through to w.
type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
