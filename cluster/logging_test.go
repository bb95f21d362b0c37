package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// jsonLines decodes every line of buf as one JSON object.
func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestHCLoggerLevels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		threshold hclog.Level // the adapter's own level (raft log level)
		handler   slog.Level  // the node's --log-level
		logAt     hclog.Level
		want      string // slog level of the line; "" for no line
	}{
		{"trace is debug", hclog.Trace, slog.LevelDebug, hclog.Trace, "DEBUG"},
		{"debug is debug", hclog.Trace, slog.LevelDebug, hclog.Debug, "DEBUG"},
		{"info is info", hclog.Trace, slog.LevelDebug, hclog.Info, "INFO"},
		{"warn is warn", hclog.Trace, slog.LevelDebug, hclog.Warn, "WARN"},
		{"error is error", hclog.Trace, slog.LevelDebug, hclog.Error, "ERROR"},
		{"below the adapter's level", hclog.Warn, slog.LevelDebug, hclog.Info, ""},
		{"at the adapter's level", hclog.Warn, slog.LevelDebug, hclog.Warn, "WARN"},
		{"below the handler's level", hclog.Trace, slog.LevelInfo, hclog.Debug, ""},
		{"off drops errors", hclog.Off, slog.LevelDebug, hclog.Error, ""},
		{"unknown level name is info", hclog.LevelFromString("loud"), slog.LevelDebug, hclog.Debug, ""},
		{"unknown level name passes info", hclog.LevelFromString("loud"), slog.LevelDebug, hclog.Info, "INFO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := NewHCLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tt.handler})), "raft", tt.threshold)
			l.Log(tt.logAt, "entering follower state", "term", 3)
			lines := jsonLines(t, &buf)
			if tt.want == "" {
				if len(lines) != 0 {
					t.Fatalf("want no line, got %v", lines)
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("want one line, got %v", lines)
			}
			got := lines[0]
			if got["level"] != tt.want || got["msg"] != "entering follower state" ||
				got["component"] != "raft" || got["term"] != float64(3) {
				t.Fatalf("got %v, want level %s, component raft, term 3", got, tt.want)
			}
		})
	}
}

// TestFirstElectionIsNotAWarning: a clean start logs Raft's "starting
// election" at info; after a leader was known it stays a warning.
// TestExpectedEventsAreNotWarnings: what every clean start and every join
// logs is information; the same words in other circumstances stay
// warnings, so an operator who alerts on warnings is paged only for those.
func TestExpectedEventsAreNotWarnings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		log  func(hclog.Logger)
		want string
	}{
		{"first election", func(l hclog.Logger) {
			l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID(""))
		}, "INFO"},
		{"election after a leader", func(l hclog.Logger) {
			l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress("10.0.0.2:8081"), "last-leader-id", raft.ServerID("node2"))
		}, "WARN"},
		{"a new server's empty log", func(l hclog.Logger) {
			l.Warn("failed to get previous log", "previous-index", uint64(42), "last-index", uint64(0), "error", raft.ErrLogNotFound)
		}, "INFO"},
		{"a gap in a server's log", func(l hclog.Logger) {
			l.Warn("failed to get previous log", "previous-index", uint64(42), "last-index", uint64(17), "error", raft.ErrLogNotFound)
		}, "WARN"},
		{"the leader finds a server's log empty", func(l hclog.Logger) {
			l.Warn("appendEntries rejected, sending older logs", "peer", raft.Server{ID: "node4"}, "next", uint64(1))
		}, "INFO"},
		{"the leader finds a server's log diverged", func(l hclog.Logger) {
			l.Warn("appendEntries rejected, sending older logs", "peer", raft.Server{ID: "node4"}, "next", uint64(300))
		}, "WARN"},
		{"a member refutes a suspicion", func(l hclog.Logger) {
			l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Println("[WARN] memberlist: Refuting a suspect message (from: node2)")
		}, "INFO"},
		{"a member refutes its death", func(l hclog.Logger) {
			l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Println("[WARN] memberlist: Refuting a dead message (from: node2)")
		}, "WARN"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(NewHCLogger(slog.New(slog.NewJSONHandler(&buf, nil)), "raft", hclog.Warn))
			if lines := jsonLines(t, &buf); len(lines) != 1 || lines[0]["level"] != tt.want {
				t.Errorf("%v, want one %s line", lines, tt.want)
			}
		})
	}
}

func TestHCLoggerInfersStandardLoggerLevels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line      string
		wantLevel string
		wantMsg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:5000", "DEBUG", "memberlist: Stream connection from=127.0.0.1:5000"},
		{"[TRACE] memberlist: detail", "DEBUG", "memberlist: detail"},
		{"[INFO] memberlist: Marking node2 as failed", "INFO", "memberlist: Marking node2 as failed"},
		{"[WARN] memberlist: Was able to connect to node2 over TCP but UDP probes failed", "WARN",
			"memberlist: Was able to connect to node2 over TCP but UDP probes failed"},
		{"[ERR] memberlist: Failed to send ping: connection refused", "ERROR", "memberlist: Failed to send ping: connection refused"},
		{"[ERROR] memberlist: push/pull failed", "ERROR", "memberlist: push/pull failed"},
		{"no prefix at all", "INFO", "no prefix at all"},
		{"[WARNING] not a known prefix", "INFO", "[WARNING] not a known prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			var buf bytes.Buffer
			l := NewHCLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "memberlist", hclog.Trace)
			std := l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
			std.Println(tt.line)
			lines := jsonLines(t, &buf)
			if len(lines) != 1 {
				t.Fatalf("want one line, got %v", lines)
			}
			if got := lines[0]; got["level"] != tt.wantLevel || got["msg"] != tt.wantMsg || got["component"] != "memberlist" {
				t.Fatalf("got %v, want level %s msg %q component memberlist", got, tt.wantLevel, tt.wantMsg)
			}
		})
	}
}

func TestHCLoggerStandardWriterForcedAndPlain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts *hclog.StandardLoggerOptions
		want string
	}{
		{"no inference: info, prefix kept", &hclog.StandardLoggerOptions{}, "INFO"},
		{"nil options: info", nil, "INFO"},
		{"forced level wins over the prefix", &hclog.StandardLoggerOptions{InferLevels: true, ForceLevel: hclog.Error}, "ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := NewHCLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "x", hclog.Trace)
			_, _ = l.StandardWriter(tt.opts).Write([]byte("[DEBUG] hello\n"))
			lines := jsonLines(t, &buf)
			if len(lines) != 1 || lines[0]["level"] != tt.want {
				t.Fatalf("got %v, want one line at %s", lines, tt.want)
			}
		})
	}
}

func TestHCLoggerNamedWithAndSetLevel(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	root := NewHCLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft", hclog.Info)
	sub := root.Named("snapshot").With("path", "/data")
	if sub.Name() != "raft.snapshot" {
		t.Fatalf("Named: got %q, want raft.snapshot", sub.Name())
	}
	sub.Info("creating new snapshot")
	root.SetLevel(hclog.Error) // shared with derived loggers, as in hclog
	sub.Warn("dropped")
	if sub.IsWarn() || !sub.IsError() {
		t.Fatalf("after SetLevel(Error): IsWarn %v IsError %v", sub.IsWarn(), sub.IsError())
	}
	lines := jsonLines(t, &buf)
	if len(lines) != 1 {
		t.Fatalf("want one line, got %v", lines)
	}
	if got := lines[0]; got["component"] != "raft.snapshot" || got["path"] != "/data" {
		t.Fatalf("got %v, want component raft.snapshot and path /data", got)
	}
}

// TestRepeatedFailuresFromOneSource: a failure one source repeats many
// times a second (a gossip packet under a wrong key) is logged once a
// minute with the count held back since; another source, another kind of
// failure, and a forged flood of sources each still get their lines, the
// last within a bounded memory.
func TestRepeatedFailuresFromOneSource(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	std := NewHCLogger(slog.New(slog.NewJSONHandler(&buf, nil)), "memberlist", hclog.Info).
		StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	clock := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	std.Writer().(*stdlogWriter).repeats.now = func() time.Time { return clock }
	decrypt := func(from string) {
		std.Printf("[ERR] memberlist: Decrypt packet failed: No installed keys could decrypt the message from=%s", from)
	}

	for range 1000 {
		decrypt("198.51.100.7:7946")
	}
	decrypt("198.51.100.7:50123") // the same host from another port
	decrypt("198.51.100.8:7946")  // another host
	std.Printf("[ERR] memberlist: Failed to decode ping request: bad from=198.51.100.7:7946")
	std.Printf("[WARN] memberlist: Was able to connect to node2 over TCP but UDP probes failed") // names no source
	std.Printf("[DEBUG] memberlist: Stream connection from=198.51.100.7:7946")                   // below Warn: never held
	clock = clock.Add(repeatWindow)
	decrypt("198.51.100.7:7946")

	var got []string
	for _, l := range jsonLines(t, &buf) {
		got = append(got, fmt.Sprintf("%s %v repeated=%v", l["level"], l["msg"], l["repeated"]))
	}
	want := []string{
		"ERROR memberlist: Decrypt packet failed: No installed keys could decrypt the message from=198.51.100.7:7946 repeated=<nil>",
		"ERROR memberlist: Decrypt packet failed: No installed keys could decrypt the message from=198.51.100.8:7946 repeated=<nil>",
		"ERROR memberlist: Failed to decode ping request: bad from=198.51.100.7:7946 repeated=<nil>",
		"WARN memberlist: Was able to connect to node2 over TCP but UDP probes failed repeated=<nil>",
		"ERROR memberlist: Decrypt packet failed: No installed keys could decrypt the message from=198.51.100.7:7946 repeated=1000",
	}
	if !slices.Equal(got, want) {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Forged sources: memory stays bounded, and the sources beyond the
	// bound share one line a minute.
	buf.Reset()
	std = NewHCLogger(slog.New(slog.NewJSONHandler(&buf, nil)), "memberlist", hclog.Info).
		StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	for i := range 5000 {
		decrypt(fmt.Sprintf("10.%d.%d.%d:7946", i>>16, (i>>8)&255, i&255))
	}
	if n := len(jsonLines(t, &buf)); n != repeatSources+1 {
		t.Errorf("5000 forged sources logged %d lines, want %d: one for each source remembered, one for all the others", n, repeatSources+1)
	}
	if n := len(std.Writer().(*stdlogWriter).repeats.seen); n > repeatSources+1 {
		t.Errorf("%d sources remembered, want at most %d", n, repeatSources+1)
	}
}
