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

// Scheduler writes the backups while this node leads (Run) and says how
// the last ones went (Status, Overdue, the collectors).
type Scheduler struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	mu sync.Mutex
	st Status
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
	return &Scheduler{cfg: cfg, log: cfg.Logger.With("component", "backups", "to", cfg.Store.String()), m: newMetrics()}
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
func (s *Scheduler) tick(ctx context.Context) (next time.Time) {
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
	mine := newestFirst(names, cluster)
	var newest Name
	if len(mine) > 0 {
		newest = mine[0]
		if due := newest.Time.Add(s.cfg.Interval); start.Before(due) {
			s.goodAt(newest.Time)
			return due
		}
	}
	index := s.cfg.Source.AppliedIndex()
	if newest.Hash != "" && newest.Index == index {
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
	if hash == newest.Hash {
		s.skipped(start, newest)
		return start.Add(s.cfg.Interval)
	}
	name := Name{Cluster: cluster, Time: start, Index: index, Hash: hash}
	if err := s.cfg.Store.Put(ctx, name.String(), spool, size); err != nil {
		s.failed(start, fmt.Errorf("store %s in %s: %w", name, s.cfg.Store, err))
		return retry
	}
	s.written(start, name, size)
	s.prune(ctx, append([]Name{name}, mine...))
	return start.Add(s.cfg.Interval)
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

// prune deletes this cluster's backups past the newest Retain (all given
// newest first). A failure is logged: the backup itself was written.
func (s *Scheduler) prune(ctx context.Context, mine []Name) {
	var errs []error
	for _, old := range mine[min(s.cfg.Retain, len(mine)):] {
		if err := s.cfg.Store.Delete(ctx, old.String()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete %s: %w", old, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("old backups not deleted; they are deleted after the next backup", "err", err)
	}
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
