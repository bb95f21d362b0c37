package httpd

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestAccessLog(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[on], func(t *testing.T) {
			var buf bytes.Buffer
			s := newTestServer(t, func(c *Config) {
				c.AccessLog = on
				c.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
			})
			code := mustCreate(t, s, `{"url":"https://example.com/logged"}`)
			do(s, "GET", "/"+code, "", "")
			do(s, "GET", "/health", "", "")
			var lines []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var m map[string]any
				if line == "" || json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "request" {
					continue
				}
				lines = append(lines, m)
			}
			if !on {
				if len(lines) != 0 {
					t.Fatalf("access log off: got request lines %v", lines)
				}
				return
			}
			want := []struct {
				method, path string
				status       float64
			}{{"POST", "/api/v1/urls", 201}, {"GET", "/" + code, 302}, {"GET", "/health", 200}}
			if len(lines) != len(want) {
				t.Fatalf("access log on: want %d request lines, got %v", len(want), lines)
			}
			for i, w := range want {
				m := lines[i]
				if m["method"] != w.method || m["path"] != w.path || m["status"] != w.status ||
					m["node"] != "test" || m["remote"] != "127.0.0.1:5555" || m["level"] != "INFO" {
					t.Errorf("line %d: got %v, want %s %s %v from node test", i, m, w.method, w.path, w.status)
				}
				if _, ok := m["duration"].(float64); !ok {
					t.Errorf("line %d: no duration: %v", i, m)
				}
			}
		})
	}
}

// BenchmarkRedirectWithAccessLog is BenchmarkRedirect with --access-log,
// lines encoded as JSON and discarded: what the access log costs.
func BenchmarkRedirectWithAccessLog(b *testing.B) {
	benchmarkRedirect(b, func(c *Config) {
		c.AccessLog = true
		c.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	})
}
