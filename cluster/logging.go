package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Raft logs through hclog and memberlist through a *log.Logger; both are
// sent to the node's *slog.Logger here, so every line the process writes
// has the one format the operator chose (text or JSON) and one level
// scheme. hclog's Trace and Debug are slog's Debug; Info, Warn and Error
// are the same. Each line carries the library's name as "component".

// NewHCLogger returns an hclog.Logger that writes through l. Lines below
// level are dropped before they reach l (whose handler applies its own
// level after that); hclog.Off drops everything, and hclog.NoLevel (what
// hclog.LevelFromString returns for a name it does not know) is Info, as
// in hclog.
func NewHCLogger(l *slog.Logger, name string, level hclog.Level) hclog.Logger {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	a := &hclogAdapter{base: l, name: name, level: new(atomic.Int32)}
	a.level.Store(int32(level))
	a.log = a.derive()
	return a
}

// hclogAdapter implements hclog.Logger on top of slog.
type hclogAdapter struct {
	base    *slog.Logger // the node's logger, without name or implied args
	log     *slog.Logger // base with component and implied args
	name    string
	implied []any
	// level is shared with the loggers derived by With and Named, as
	// hclog's own loggers share theirs.
	level *atomic.Int32
}

// slogLevel maps an hclog level to slog's; ok is false for levels that
// never print (Off, and NoLevel, which hclog treats as "inherit").
func slogLevel(l hclog.Level) (slog.Level, bool) {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug, true
	case hclog.Info:
		return slog.LevelInfo, true
	case hclog.Warn:
		return slog.LevelWarn, true
	case hclog.Error:
		return slog.LevelError, true
	}
	return 0, false
}

func (a *hclogAdapter) derive() *slog.Logger {
	l := a.base
	if a.name != "" {
		l = l.With("component", a.name)
	}
	if len(a.implied) > 0 {
		l = l.With(a.implied...)
	}
	return l
}

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	threshold := hclog.Level(a.level.Load())
	if threshold == hclog.Off || level < threshold {
		return false
	}
	sl, ok := slogLevel(level)
	return ok && a.log.Enabled(context.Background(), sl)
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if !a.enabled(level) {
		return
	}
	sl, _ := slogLevel(level)
	if sl == slog.LevelWarn && expectedEvent(msg, args) {
		sl = slog.LevelInfo
	}
	a.log.Log(context.Background(), sl, msg, args...)
}

// expectedEvent reports a warning of Raft or memberlist that a healthy
// cluster logs as a matter of course: an operator who alerts on warnings
// would be paged for a clean start or a join. The same words in other
// circumstances stay warnings.
func expectedEvent(msg string, args []any) bool {
	switch msg {
	case "heartbeat timeout reached, starting election":
		// Every new cluster and every restart has never known a leader.
		return argString(args, "last-leader-id") == ""
	case "failed to get previous log":
		// A new server's log is empty until the leader finds where to start.
		return argString(args, "last-index") == "0"
	case "appendEntries rejected, sending older logs":
		// The leader, finding that a server's log is empty: next index 1.
		return argString(args, "next") == "1"
	}
	// A member refutes a suspicion about itself, as a joining node does
	// while the others still probe its predecessor at that address.
	return strings.HasPrefix(msg, "memberlist: Refuting a suspect message")
}

// argString is the value of key in an hclog argument list, as text ("" when
// absent): Raft passes its own types (raft.ServerID, uint64).
func argString(args []any, key string) string {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == key {
			return fmt.Sprint(args[i+1])
		}
	}
	return ""
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.implied = append(append([]any(nil), a.implied...), args...)
	c.log = c.derive()
	return &c
}

func (a *hclogAdapter) Name() string { return a.name }

// Named appends to the name, as hclog does ("raft.snapshot").
func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.ResetNamed(name)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	c.log = c.derive()
	return &c
}

func (a *hclogAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }
func (a *hclogAdapter) GetLevel() hclog.Level      { return hclog.Level(a.level.Load()) }

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer for a *log.Logger (memberlist's, the
// standard library's). Each write is one line; with InferLevels its level
// is read from a leading "[DEBUG]", "[WARN]", "[ERR]"... as hclog's own
// loggers do, otherwise it is logged at ForceLevel, or Info.
func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &stdlogWriter{log: a, infer: opts.InferLevels, force: opts.ForceLevel, repeats: newRepeats(time.Now)}
}

// stdlogWriter turns *log.Logger lines into leveled log records.
type stdlogWriter struct {
	log     hclog.Logger
	infer   bool
	force   hclog.Level
	repeats *repeats
}

func (w *stdlogWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimRight(p, " \t\r\n"))
	level, msg := inferLevel(line)
	switch {
	case w.force != hclog.NoLevel:
		level = w.force
	case !w.infer:
		level, msg = hclog.Info, line
	}
	if level < hclog.Warn {
		w.log.Log(level, msg)
		return len(p), nil
	}
	if ok, held := w.repeats.admit(msg); ok && held > 0 {
		w.log.Log(level, msg, "repeated", held)
	} else if ok {
		w.log.Log(level, msg)
	}
	return len(p), nil
}

// A failure one source repeats (a gossip packet under a wrong key, sent
// by a misconfigured node or an attacker, many a second) is logged once a
// minute per source and kind, with the count held back since, so that the
// log stays readable and cheap while it goes on.
const (
	repeatWindow = time.Minute
	// repeatSources bounds the sources remembered: UDP sources can be
	// forged, so beyond it the others share one entry.
	repeatSources = 1024
)

// repeats decides which warnings that name their source ("from=ADDR",
// as memberlist writes it) are logged.
type repeats struct {
	now  func() time.Time
	mu   sync.Mutex
	seen map[string]*repeated // by source and kind
}

type repeated struct {
	logged time.Time // when a line of this kind from this source was last logged
	held   int       // lines held back since
}

func newRepeats(now func() time.Time) *repeats {
	return &repeats{now: now, seen: map[string]*repeated{}}
}

// admit reports whether msg is logged, and how many like it were held
// back since the last one logged.
func (r *repeats) admit(msg string) (ok bool, held int) {
	source, kind, named := repeatKey(msg)
	if !named {
		return true, 0
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	key := source + " " + kind
	e, found := r.seen[key]
	if !found && len(r.seen) >= repeatSources {
		r.sweep(now)
		if len(r.seen) >= repeatSources {
			key = "other sources " + kind
			e, found = r.seen[key]
		}
	}
	if !found {
		r.seen[key] = &repeated{logged: now}
		return true, 0
	}
	if now.Sub(e.logged) < repeatWindow {
		e.held++
		return false, 0
	}
	held, e.held, e.logged = e.held, 0, now
	return true, held
}

// sweep forgets the entries whose minute is over and that held nothing.
func (r *repeats) sweep(now time.Time) {
	for k, e := range r.seen {
		if now.Sub(e.logged) >= repeatWindow && e.held == 0 {
			delete(r.seen, k)
		}
	}
}

// repeatKey finds in msg the source's host (the address after "from=",
// without its port: a stream's port changes with each connection) and the
// kind of failure (the message up to its first detail after the
// component's name); named is false when msg names no source.
func repeatKey(msg string) (source, kind string, named bool) {
	i := strings.Index(msg, "from=")
	if i < 0 {
		return "", "", false
	}
	addr, _, _ := strings.Cut(msg[i+len("from="):], " ")
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	kind = strings.TrimSpace(msg[:i])
	component, rest, _ := strings.Cut(kind, ": ")
	if what, _, cut := strings.Cut(rest, ": "); cut {
		kind = component + ": " + what
	}
	return addr, kind, true
}

// inferLevel reads the level prefix the HashiCorp libraries put on lines
// they write to a *log.Logger and returns the level and the rest of the
// line; a line without one is Info.
func inferLevel(line string) (hclog.Level, string) {
	prefixes := [...]struct {
		prefix string
		level  hclog.Level
	}{
		{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
		{"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error},
	}
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(line, p.prefix); ok {
			return p.level, strings.TrimSpace(rest)
		}
	}
	return hclog.Info, line
}

var _ hclog.Logger = (*hclogAdapter)(nil)
