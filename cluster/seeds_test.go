package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeResolver answers host names as the test sets them, and counts the
// lookups.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]string // a name not here does not resolve
	lookups map[string]int
}

func newFakeResolver() *fakeResolver {
	return &fakeResolver{answers: map[string][]string{}, lookups: map[string]int{}}
}

func (r *fakeResolver) set(host string, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = ips
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups[host]
}

func (r *fakeResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups[host]++
	ips, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(ips), nil
}

// lockedBuffer is a log destination the node's goroutines may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return jsonLines(t, bytes.NewBuffer(b.buf.Bytes()))
}

func TestSeedAddresses(t *testing.T) {
	t.Parallel()
	r := newFakeResolver()
	r.set("nodes.test", "10.0.0.2", "10.0.0.1", "10.0.0.2", "fd00:0::3", "not-an-ip")
	r.set("other.test", "10.0.0.1", "10.0.0.4")
	var logs lockedBuffer
	s := newSeedResolver(r, slog.New(slog.NewJSONHandler(&logs, nil)),
		[]string{"nodes.test:8082", "10.0.0.9:8082", "[fd00::9]:8082", "other.test:8082", "gone.test:8082", "10.0.0.8", "10.0.0.9:8082"},
		"7000", "10.0.0.1:8082")

	got, fresh := s.addrs(context.Background(), 0)
	want := []string{
		"10.0.0.2:8082", "[fd00::3]:8082", // nodes.test: deduplicated, normalised, without this node's own address
		"10.0.0.9:8082", "[fd00::9]:8082", // IP literals as they are
		"10.0.0.4:8082", // other.test: its address not already listed
		"10.0.0.8:7000", // no port: this node's gossip port
	}
	if !fresh || !slices.Equal(got, want) {
		t.Fatalf("addrs = %v (fresh %v), want %v", got, fresh, want)
	}

	// Within maxAge the last answer serves; past it, names are asked again.
	r.set("nodes.test", "10.0.0.5")
	if got, fresh := s.addrs(context.Background(), time.Hour); fresh || !slices.Equal(got, want) {
		t.Fatalf("cached addrs = %v (fresh %v), want %v", got, fresh, want)
	}
	if r.count("nodes.test") != 1 {
		t.Fatalf("%d lookups of nodes.test, want 1", r.count("nodes.test"))
	}
	got, _ = s.addrs(context.Background(), 0)
	if !slices.Contains(got, "10.0.0.5:8082") || slices.Contains(got, "10.0.0.2:8082") {
		t.Fatalf("after nodes.test moved: %v", got)
	}

	// A name that does not resolve is logged once per change of answer,
	// not every round.
	s.addrs(context.Background(), 0)
	r.set("gone.test", "10.0.0.7")
	s.addrs(context.Background(), 0)
	s.addrs(context.Background(), 0)
	var failed, resolved int
	for _, line := range logs.lines(t) {
		if line["seed"] != "gone.test:8082" {
			continue
		}
		switch line["level"] {
		case "WARN":
			failed++
		case "INFO":
			resolved++
		}
	}
	if failed != 1 || resolved != 1 {
		t.Fatalf("gone.test logged %d failures and %d resolutions over six rounds, want 1 and 1", failed, resolved)
	}
}
