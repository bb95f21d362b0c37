package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func TestNewLoggerFormats(t *testing.T) {
	tests := []struct {
		format, level string
		wantErr       string
		isJSON        bool
	}{
		{format: "text", level: "info"},
		{format: "json", level: "debug", isJSON: true},
		{format: "yaml", level: "info", wantErr: "--log-format must be text or json"},
		{format: "", level: "info", wantErr: "--log-format must be text or json"},
		{format: "json", level: "loud", wantErr: "--log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := newLogger(tt.level, tt.format, &buf)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error containing %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info("hello", "k", "v")
			var m map[string]any
			gotJSON := json.Unmarshal(buf.Bytes(), &m) == nil
			if gotJSON != tt.isJSON || !strings.Contains(buf.String(), "hello") {
				t.Fatalf("format %s: got %q", tt.format, buf.String())
			}
		})
	}
}

func TestMaxConnsPerIPFlag(t *testing.T) {
	tests := []struct {
		name    string
		env     string // LINKRAFT_MAX_CONNS_PER_IP, "" for unset
		args    []string
		want    int
		wantErr string
	}{
		{name: "default", want: 1024},
		{name: "flag", args: []string{"--max-conns-per-ip", "64"}, want: 64},
		{name: "off", args: []string{"--max-conns-per-ip", "0"}, want: 0},
		{name: "environment", env: "300", want: 300},
		{name: "flag wins over environment", env: "300", args: []string{"--max-conns-per-ip", "20"}, want: 20},
		{name: "negative", args: []string{"--max-conns-per-ip", "-1"}, wantErr: "--max-conns-per-ip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("LINKRAFT_MAX_CONNS_PER_IP", tt.env)
			}
			cfg, err := parseServeFlags(append([]string{"--id", "n1"}, tt.args...), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error naming %s, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil || cfg.maxConnsPerIP != tt.want {
				t.Fatalf("max conns per IP = %v (err %v), want %d", cfg, err, tt.want)
			}
		})
	}
}

// TestShutdownDrainFlag: --shutdown-drain is how long a stopping node
// keeps serving after /health turned 503: 5 s unless set, by flag or
// LINKRAFT_SHUTDOWN_DRAIN; 0 stops at once.
func TestShutdownDrainFlag(t *testing.T) {
	tests := []struct {
		name    string
		env     string // LINKRAFT_SHUTDOWN_DRAIN, "" for unset
		args    []string
		want    time.Duration
		wantErr string
	}{
		{name: "default", want: 5 * time.Second},
		{name: "flag", args: []string{"--shutdown-drain", "12s"}, want: 12 * time.Second},
		{name: "off", args: []string{"--shutdown-drain", "0"}, want: 0},
		{name: "environment", env: "2s", want: 2 * time.Second},
		{name: "flag wins over environment", env: "2s", args: []string{"--shutdown-drain", "1s"}, want: time.Second},
		{name: "negative", args: []string{"--shutdown-drain", "-1s"}, wantErr: "--shutdown-drain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("LINKRAFT_SHUTDOWN_DRAIN", tt.env)
			}
			cfg, err := parseServeFlags(append([]string{"--id", "n1"}, tt.args...), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error naming %s, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil || cfg.shutdownDrain != tt.want {
				t.Fatalf("shutdown drain = %v (err %v), want %v", cfg.shutdownDrain, err, tt.want)
			}
		})
	}
}

func TestShortURLBase(t *testing.T) {
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 8080} }
	tests := []struct {
		name, baseURL  string
		listen         net.Addr
		advertised     string
		want           string
		guessed, warns bool
	}{
		{"--base-url always wins", "https://s.example.com", tcp("0.0.0.0"), "10.0.0.1:8080", "https://s.example.com", false, false},
		{"loopback follows Host", "", tcp("127.0.0.1"), "127.0.0.1:8080", "", false, false},
		{"IPv6 loopback follows Host", "", tcp("::1"), "[::1]:8080", "", false, false},
		{"loopback follows Host whatever it advertises", "", tcp("127.0.0.1"), "10.0.0.1:8080", "", false, false},
		{"all interfaces: the advertised address", "", tcp("0.0.0.0"), "10.0.0.1:8080", "http://10.0.0.1:8080", true, true},
		{"IPv6 all interfaces", "", tcp("::"), "[2001:db8::1]:8080", "http://[2001:db8::1]:8080", true, true},
		{"a public address", "", tcp("192.0.2.7"), "192.0.2.7:8080", "http://192.0.2.7:8080", true, true},
		{"all interfaces, a host name advertised", "", tcp("0.0.0.0"), "lr1.internal:8080", "http://lr1.internal:8080", true, true},
		// The quick start: all interfaces, Raft on loopback, no --advertise.
		// Still not the Host header; the links name loopback, no warning.
		{"all interfaces, advertised on loopback", "", tcp("0.0.0.0"), "127.0.0.1:8080", "http://127.0.0.1:8080", true, false},
		{"IPv6 all interfaces, advertised on loopback", "", tcp("::"), "[::1]:8080", "http://[::1]:8080", true, false},
		{"all interfaces, --advertise localhost", "", tcp("0.0.0.0"), "localhost:8080", "http://localhost:8080", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, guessed, warns := shortURLBase(tt.baseURL, tt.listen, tt.advertised)
			if got != tt.want || guessed != tt.guessed || warns != tt.warns {
				t.Errorf("shortURLBase = %q, %v, %v; want %q, %v, %v", got, guessed, warns, tt.want, tt.guessed, tt.warns)
			}
		})
	}
}

// TestQuickStartAdvertisesLoopback: what a plain "linkraft serve" listens
// on and advertises lands in shortURLBase's case without a warning.
func TestQuickStartAdvertisesLoopback(t *testing.T) {
	// The defaults, whatever the shell running the test sets.
	for _, name := range []string{"LINKRAFT_HTTP_ADDR", "LINKRAFT_RAFT_ADDR", "LINKRAFT_ADVERTISE", "LINKRAFT_BASE_URL"} {
		t.Setenv(name, "") // restores it after the test
		os.Unsetenv(name)
	}
	cfg, err := parseServeFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(cfg.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.ResolveTCPAddr("tcp", cfg.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	listen := &net.TCPAddr{IP: net.IPv6unspecified, Port: ln.Port} // what net.Listen makes of ":8080"
	advertised := advertisedHTTP(listen, cfg.advertise, cfg.raftAddr)
	if base, guessed, warns := shortURLBase(cfg.baseURL, listen, advertised); base != "http://127.0.0.1:"+port || !guessed || warns {
		t.Errorf("defaults (--http-addr %s, --raft-addr %s): short URLs %q, guessed %v, warns %v; want http://127.0.0.1:%s without a warning",
			cfg.httpAddr, cfg.raftAddr, base, guessed, warns, port)
	}
}
