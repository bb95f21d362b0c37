package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gateBound bounds every wait for an event in the gate's tests: a
// failure, not a measure of speed.
const gateBound = 10 * time.Second

// gateServer is a TLS server for the gate's tests, with the certificate
// it serves as the pool a client trusts.
func gateServer(t *testing.T) (serveTLS func(net.Listener) error, roots *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gate.example"}, DNSNames: []string{"gate.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(leaf)
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	return func(ln net.Listener) error {
		srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: gateBound}
		return srv.Serve(tls.NewListener(ln, cfg))
	}, roots
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// handshakeOutcome is what a client sees of a TLS handshake with addr:
// "refused", "completed", or the error.
func handshakeOutcome(addr string, roots *x509.CertPool) string {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: gateBound}, "tcp", addr, &tls.Config{ServerName: "gate.example", RootCAs: roots})
	switch {
	case err == nil:
		conn.Close()
		return "completed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	default:
		return err.Error()
	}
}

// gateLog is a logger whose lines also arrive on a channel.
func gateLog() (*slog.Logger, <-chan string) {
	lines := make(chan string, 16)
	return slog.New(slog.NewTextHandler(chanWriter(lines), nil)), lines
}

type chanWriter chan string

func (w chanWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}

func waitFor(t *testing.T, lines <-chan string, msg string) string {
	t.Helper()
	timeout := time.After(gateBound)
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, msg) {
				return l
			}
		case <-timeout:
			t.Fatalf("no log line %q within %v", msg, gateBound)
		}
	}
}

// TestHTTPSGateRefusesUntilReady: until the certificates can be served,
// nothing listens on the HTTPS port, so a client's connection is refused
// (a browser tries the next address) rather than answered with a TLS
// alert; the log says so once, naming what it waits for. Once ready,
// handshakes complete; once closed, connections are refused again.
func TestHTTPSGateRefusesUntilReady(t *testing.T) {
	serveTLS, roots := gateServer(t)
	ready := make(chan struct{})
	g := &httpsGate{addr: freeAddr(t), acme: true, ready: ready, missing: func() []string { return []string{"gate.example"} }, stop: make(chan struct{})}
	defer g.close()
	if err := g.listen(); err != nil {
		t.Fatal(err)
	}
	log, lines := gateLog()
	errs := make(chan error, 1)
	g.serve(serveTLS, errs, log)
	if l := waitFor(t, lines, "HTTPS stays closed"); !strings.Contains(l, "waiting_for=[gate.example]") {
		t.Fatalf("the log does not name what HTTPS waits for: %s", l)
	}
	if got := handshakeOutcome(g.addr, roots); got != "refused" {
		t.Fatalf("before the certificates can be served: %s, want refused", got)
	}
	close(ready)
	waitFor(t, lines, "serving HTTPS")
	if got := handshakeOutcome(g.addr, roots); got != "completed" {
		t.Fatalf("once ready: %s, want completed", got)
	}
	g.close()
	select {
	case <-errs: // the server ended with its listener
	case <-time.After(gateBound):
		t.Fatal("the HTTPS server does not end when the gate closes")
	}
	if got := handshakeOutcome(g.addr, roots); got != "refused" {
		t.Fatalf("once closed: %s, want refused", got)
	}
}

// TestHTTPSGateReadyAtStart: a node that can serve every name at start
// (certificate files, or certificates it kept) listens before it says it
// is ready, as on its plain HTTP port: a handshake right after serve
// completes, and nothing about waiting is logged.
func TestHTTPSGateReadyAtStart(t *testing.T) {
	serveTLS, roots := gateServer(t)
	ready := make(chan struct{})
	close(ready)
	g := &httpsGate{addr: freeAddr(t), ready: ready, missing: func() []string { return nil }, stop: make(chan struct{})}
	defer g.close()
	if err := g.listen(); err != nil {
		t.Fatal(err)
	}
	log, lines := gateLog()
	g.serve(serveTLS, make(chan error, 1), log)
	if got := handshakeOutcome(g.addr, roots); got != "completed" {
		t.Fatalf("ready at start: %s, want completed", got)
	}
	if l := waitFor(t, lines, "msg="); !strings.Contains(l, "serving HTTPS") {
		t.Fatalf("first log line %q, want serving HTTPS", l)
	}
}

// TestHTTPSGateFailsStartOnTakenPort: a port another process holds fails
// the start, even while the certificates are not there yet.
func TestHTTPSGateFailsStartOnTakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	g := &httpsGate{addr: taken.Addr().String(), ready: make(chan struct{}), missing: func() []string { return nil }, stop: make(chan struct{})}
	if err := g.listen(); err == nil || !strings.Contains(err.Error(), "listen https") {
		t.Fatalf("listen on a taken port: %v, want an error", err)
	}
}
