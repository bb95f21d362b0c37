package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// waitBound bounds every wait for an event in these tests: a failure, not
// a measure of speed.
const waitBound = 10 * time.Second

// machine is a state machine as a Source follows it: certificates and
// challenges changed at an index, each change announced.
type machine struct {
	mu         sync.Mutex
	certs      map[string]fsm.Certificate
	challenges map[string]fsm.Challenge
	applied    uint64
	changed    chan struct{}
}

func newMachine(applied uint64, certs ...fsm.Certificate) *machine {
	m := &machine{certs: map[string]fsm.Certificate{}, challenges: map[string]fsm.Challenge{}, applied: applied}
	for _, c := range certs {
		m.certs[c.Name] = c
	}
	return m
}

func (m *machine) Certificate(name string) (fsm.Certificate, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.certs[name]
	return c, ok
}

func (m *machine) Certificates() []fsm.Certificate {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fsm.Certificate
	for _, c := range m.certs {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b fsm.Certificate) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (m *machine) Challenge(token string) (fsm.Challenge, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.challenges[token]
	return c, ok
}

func (m *machine) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
	return m.changed
}

func (m *machine) Applied() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.applied
}

// apply makes change at index and announces it.
func (m *machine) apply(index uint64, change func(*machine)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	change(m)
	m.applied = index
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
}

// issue is a certificate for name valid from from to to, its key sealed
// with seal as the Manager stores it.
func issue(t *testing.T, seal Sealer, name string, from, to time.Time) fsm.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	c, err := certificateOf(name, [][]byte{selfSigned(t, key, from, to, name)}, key, string(seal.Seal(der, []byte("certificate "+name))))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// logLines is a logger whose lines also arrive on a channel, so a test
// waits for what the Source says it did.
func logLines(t *testing.T) (*slog.Logger, <-chan string) {
	t.Helper()
	lines := make(chan string, 64)
	return slog.New(slog.NewTextHandler(lineWriter(lines), nil)), lines
}

type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default: // nobody waits for this many
	}
	return len(p), nil
}

// waitLine waits for a log line holding msg.
func waitLine(t *testing.T, lines <-chan string, msg string) string {
	t.Helper()
	timeout := time.After(waitBound)
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, msg) {
				return l
			}
		case <-timeout:
			t.Fatalf("no log line %q within %v", msg, waitBound)
		}
	}
}

// served is the leaf a handshake for name gets from src, nil when it
// fails.
func served(t *testing.T, src *Source, name string) *x509.Certificate {
	t.Helper()
	cs, err := handshake(t, src, name, "http/1.1")
	if err != nil {
		return nil
	}
	return cs.PeerCertificates[0]
}

func isReady(src *Source) bool {
	select {
	case <-src.Ready():
		return true
	default:
		return false
	}
}

// follow runs src.Follow on m until the test ends, and returns a stop
// that ends it and waits for it.
func follow(t *testing.T, src *Source, m *machine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		src.Follow(ctx, m)
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		<-done
	})
	t.Cleanup(stop)
	return stop
}

// TestSourceServesHeldCertificateAtStart: a node keeps, in its data dir,
// the certificates its state holds; started again with a state that does
// not hold the latest one yet (its snapshot predates it), it serves the
// one it kept, at once, until its state holds a newer one; once the state
// has applied what the kept copy was taken from, the state alone decides
// (a certificate removed since is served no more).
func TestSourceServesHeldCertificateAtStart(t *testing.T) {
	seal := newSealer(t)
	file := filepath.Join(t.TempDir(), "certificates")
	now := time.Now()
	first := issue(t, seal, "s.example", now.Add(-time.Hour), now.Add(30*24*time.Hour))
	gone := issue(t, seal, "gone.example", now.Add(-time.Hour), now.Add(30*24*time.Hour))

	// The run before the restart: the state gets both certificates at
	// index 40.
	log, lines := logLines(t)
	before := newMachine(10)
	src := NewSource(before, seal, SourceConfig{Names: []string{"s.example"}, HeldFile: file, Logger: log})
	stop := follow(t, src, before)
	before.apply(40, func(m *machine) { m.certs[first.Name], m.certs[gone.Name] = first, gone })
	waitLine(t, lines, "kept the certificates served here for the next start")
	stop()
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the kept certificates: %v, mode %v; want a file its owner alone may read", err, st.Mode().Perm())
	}

	// The restart: the state is its snapshot of index 30, which holds
	// neither.
	after := newMachine(30)
	src = NewSource(after, seal, SourceConfig{Names: []string{"s.example"}, HeldFile: file, Logger: log})
	if !isReady(src) {
		t.Fatalf("a node that kept a certificate for each of its names is not ready to serve them at start; missing %v", src.Missing())
	}
	leafOfFirst := leafOf(t, first.Chain)
	for name, want := range map[string]*x509.Certificate{"s.example": leafOfFirst, "": leafOfFirst, "gone.example": leafOf(t, gone.Chain)} {
		if got := served(t, src, name); got == nil || !got.Equal(want) {
			t.Fatalf("handshake for %q at start: got %v, want the certificate kept", name, got)
		}
	}
	follow(t, src, after)

	// A renewal the state applies before it caught up: the newer wins.
	renewed := issue(t, seal, "s.example", now, now.Add(90*24*time.Hour))
	after.apply(35, func(m *machine) { m.certs[renewed.Name] = renewed })
	if got := served(t, src, "s.example"); got == nil || !got.Equal(leafOf(t, renewed.Chain)) {
		t.Fatalf("the state's newer certificate is not served over the kept one: %v", got)
	}
	if got := served(t, src, "gone.example"); got == nil {
		t.Fatal("a kept certificate the state does not hold yet is not served before the state caught up")
	}
	// Caught up with what was kept (index 40), and gone.example's
	// certificate was removed meanwhile: the state alone decides.
	after.apply(41, func(m *machine) { delete(m.certs, "gone.example") })
	waitLine(t, lines, "the state holds what was kept")
	if got := served(t, src, "gone.example"); got != nil {
		t.Fatal("a certificate the caught-up state removed is still served")
	}
	if got := served(t, src, "s.example"); got == nil || got.Equal(leafOfFirst) {
		t.Fatal("the state's certificate is not served once it caught up")
	}
	waitLine(t, lines, "kept the certificates served here for the next start")
	kept := NewSource(newMachine(0), seal, SourceConfig{Names: []string{"s.example"}, HeldFile: file})
	if got := served(t, kept, "s.example"); got == nil || !got.Equal(leafOf(t, renewed.Chain)) {
		t.Fatal("the renewed certificate is not what was kept for the next start")
	}
	if got := served(t, kept, "gone.example"); got != nil {
		t.Fatal("the removed certificate is still kept for the next start")
	}
}

// TestSourceKeepsNothingBehind: a state that has not applied what was kept
// yet never overwrites it: a node that restarts twice before it catches
// up still serves the newer certificate it kept.
func TestSourceKeepsNothingBehind(t *testing.T) {
	seal := newSealer(t)
	file := filepath.Join(t.TempDir(), "certificates")
	now := time.Now()
	newer := issue(t, seal, "s.example", now, now.Add(90*24*time.Hour))
	log, lines := logLines(t)
	m := newMachine(40, newer)
	stop := follow(t, NewSource(m, seal, SourceConfig{Names: []string{"s.example"}, HeldFile: file, Logger: log}), m)
	waitLine(t, lines, "kept the certificates served here for the next start")
	stop()

	older := issue(t, seal, "s.example", now.Add(-60*24*time.Hour), now.Add(30*24*time.Hour))
	behind := newMachine(20, older)
	stop = follow(t, NewSource(behind, seal, SourceConfig{Names: []string{"s.example"}, HeldFile: file, Logger: log}), behind)
	behind.apply(21, func(*machine) {})
	behind.apply(22, func(*machine) {})
	stop()

	again := NewSource(newMachine(20, older), seal, SourceConfig{Names: []string{"s.example"}, HeldFile: file})
	if got := served(t, again, "s.example"); got == nil || !got.Equal(leafOf(t, newer.Chain)) {
		t.Fatal("a state behind what was kept overwrote it")
	}
}

// TestSourceDropsExpiredHeld: a kept certificate that has ended by the
// next start (a node down for months) is not served: the node waits for
// its state, which holds the renewal, rather than open HTTPS with a
// certificate every browser refuses.
func TestSourceDropsExpiredHeld(t *testing.T) {
	seal := newSealer(t)
	file := filepath.Join(t.TempDir(), "certificates")
	now := time.Now()
	ended := issue(t, seal, "s.example", now.Add(-90*24*time.Hour), now.Add(-time.Minute))
	log, lines := logLines(t)
	m := newMachine(7, ended)
	stop := follow(t, NewSource(m, seal, SourceConfig{Names: []string{"s.example"}, HeldFile: file, Logger: log}), m)
	waitLine(t, lines, "kept the certificates served here for the next start")
	stop()
	src := NewSource(newMachine(3), seal, SourceConfig{Names: []string{"s.example"}, HeldFile: file})
	if isReady(src) || served(t, src, "s.example") != nil {
		t.Fatal("a kept certificate that has ended is served at start")
	}
}

// TestSourceReadyOnceEveryNameCanBeServed: Ready closes once a handshake
// for each configured name can complete, not before: a node of a
// brand-new cluster, or one whose state lacks a name's certificate and
// kept none, waits for its state; Missing names what it waits for.
// Registered domains are no configured names: their certificates are
// served when there, never waited for.
func TestSourceReadyOnceEveryNameCanBeServed(t *testing.T) {
	seal := newSealer(t)
	now := time.Now()
	a := issue(t, seal, "a.example", now.Add(-time.Hour), now.Add(time.Hour))
	m := newMachine(5, a)
	src := NewSource(m, seal, SourceConfig{Names: []string{"a.example", "b.example"}, HeldFile: filepath.Join(t.TempDir(), "certificates")})
	if isReady(src) || !slices.Equal(src.Missing(), []string{"b.example"}) {
		t.Fatalf("ready %v, missing %v; want not ready, missing b.example", isReady(src), src.Missing())
	}
	follow(t, src, m)
	m.apply(6, func(m *machine) {
		m.certs["domain.example"] = issue(t, seal, "domain.example", now.Add(-time.Hour), now.Add(time.Hour))
	})
	// A certificate whose key does not open (another cluster key) is no
	// certificate: a handshake with it would fail.
	foreign := issue(t, newSealer(t), "b.example", now.Add(-time.Hour), now.Add(time.Hour))
	m.apply(7, func(m *machine) { m.certs["b.example"] = foreign })
	if isReady(src) || !slices.Equal(src.Missing(), []string{"b.example"}) {
		t.Fatalf("ready %v, missing %v with a certificate for b.example whose key does not open", isReady(src), src.Missing())
	}
	b := issue(t, seal, "b.example", now.Add(-time.Hour), now.Add(time.Hour))
	m.apply(9, func(m *machine) { m.certs["b.example"] = b })
	select {
	case <-src.Ready():
	case <-time.After(waitBound):
		t.Fatalf("not ready within %v of a certificate for every name; missing %v", waitBound, src.Missing())
	}
	if got := src.Missing(); len(got) != 0 {
		t.Fatalf("ready, yet missing %v", got)
	}
	if served(t, src, "b.example") == nil {
		t.Fatal("ready, yet a handshake for b.example fails")
	}
	if none := NewSource(newMachine(0), seal, SourceConfig{}); !isReady(none) {
		t.Fatal("a Source without configured names is not ready at once")
	}
}

// TestSourceReadyForTLSALPNValidation: a name the node cannot serve yet
// whose TLS-ALPN-01 challenge is in flight makes it ready: the CA
// validates it through the HTTPS port, so a brand-new cluster that
// validates that way must open it.
func TestSourceReadyForTLSALPNValidation(t *testing.T) {
	m := newMachine(3)
	src := NewSource(m, newSealer(t), SourceConfig{Names: []string{"a.example"}})
	follow(t, src, m)
	token := fsm.TLSALPNToken("a.example")
	m.apply(4, func(m *machine) { m.challenges[token] = fsm.Challenge{Token: token, KeyAuth: strings.Repeat("ab", 32)} })
	select {
	case <-src.Ready():
	case <-time.After(waitBound):
		t.Fatalf("not ready within %v of a TLS-ALPN-01 challenge for its name", waitBound)
	}
	if _, err := handshake(t, src, "a.example", ACMETLSProto); err != nil {
		t.Fatalf("the CA's validation handshake: %v", err)
	}
}

// TestSourceIgnoresUnreadableHeldFile: a kept file another cluster key
// sealed, or damaged, is not served and does not stop the start: the
// node waits for its state as if it had kept nothing.
func TestSourceIgnoresUnreadableHeldFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "certificates")
	now := time.Now()
	other := newSealer(t)
	m := newMachine(9, issue(t, other, "s.example", now.Add(-time.Hour), now.Add(time.Hour)))
	log, lines := logLines(t)
	stop := follow(t, NewSource(m, other, SourceConfig{Names: []string{"s.example"}, HeldFile: file, Logger: log}), m)
	waitLine(t, lines, "kept the certificates served here for the next start")
	stop()
	for _, tc := range []struct {
		name   string
		damage func()
	}{
		{"another cluster key", func() {}},
		{"damaged", func() {
			data, _ := os.ReadFile(file)
			data[len(data)/2] ^= 1
			os.WriteFile(file, data, 0o600)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.damage()
			log, lines := logLines(t)
			src := NewSource(newMachine(0), newSealer(t), SourceConfig{Names: []string{"s.example"}, HeldFile: file, Logger: log})
			waitLine(t, lines, "the certificates kept at the last run are unreadable")
			if isReady(src) || served(t, src, "s.example") != nil {
				t.Fatal("an unreadable kept file is served")
			}
		})
	}
}
