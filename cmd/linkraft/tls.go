package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/certs"
	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm/input"
	"github.com/linkraft/linkraft/httpd"
)

// letsEncrypt is the default ACME directory.
const letsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

// tlsFlags are serve's HTTPS flags.
type tlsFlags struct {
	httpsAddr                                         string
	certFile, keyFile                                 string
	acmeEmail, acmeDirectory, acmeCARoot, acmeDomains string
	httpRedirect, hsts                                bool
}

func (t *tlsFlags) acme() bool    { return t.acmeDomains != "" || t.acmeEmail != "" }
func (t *tlsFlags) files() bool   { return t.certFile != "" || t.keyFile != "" }
func (t *tlsFlags) enabled() bool { return t.acme() || t.files() }

// checkSource checks that certificates come from files or from ACME, and
// from files only with both of them.
func (t *tlsFlags) checkSource() error {
	switch {
	case t.files() && (t.certFile == "" || t.keyFile == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case t.files() && t.acme():
		return errors.New("--tls-cert/--tls-key and ACME (--acme-domains, --acme-email) exclude each other")
	}
	return nil
}

// checkDomains checks that every --acme-domains name is a domain name.
func (t *tlsFlags) checkDomains() error {
	for _, name := range splitList(t.acmeDomains) {
		if _, err := input.Domain(name); err != nil {
			return fmt.Errorf("--acme-domains: %w", err)
		}
	}
	return nil
}

// acmeConfig is the cluster's ACME configuration, nil when ACME is off.
func (t *tlsFlags) acmeConfig() (*cluster.ACMEConfig, error) {
	if !t.acme() {
		return nil, nil
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if t.acmeCARoot != "" {
		pem, err := os.ReadFile(t.acmeCARoot)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca-root: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--acme-ca-root: no PEM certificate in %s", t.acmeCARoot)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	var names []string
	for _, n := range splitList(t.acmeDomains) {
		names = append(names, strings.ToLower(n))
	}
	return &cluster.ACMEConfig{Config: certs.Config{Directory: t.acmeDirectory, Email: t.acmeEmail, HTTPClient: client}, Names: names}, nil
}

// serverTLS is how httpd serves HTTPS: the certificates of the
// replicated state (ACME), which the node also keeps in its data dir to
// serve at its next start before its state has them again, or of the
// files; and the gate that opens the HTTPS port once they can be served.
func (t *tlsFlags) serverTLS(node *cluster.Node, key *secure.Key, dataDir string, log *slog.Logger) (*httpd.TLS, *httpsGate, error) {
	_, port, err := net.SplitHostPort(t.httpsAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("--https-addr: %w", err)
	}
	out := &httpd.TLS{Port: port, RedirectHTTP: t.httpRedirect, HSTS: t.hsts}
	for _, name := range splitList(t.acmeDomains) {
		out.Names = append(out.Names, strings.ToLower(name))
	}
	gate := &httpsGate{addr: t.httpsAddr, acme: t.acme(), redirect: t.httpRedirect, stop: make(chan struct{})}
	if t.files() {
		files, err := certs.NewFileSource(t.certFile, t.keyFile)
		if err != nil {
			return nil, nil, err
		}
		out.Config = httpd.NewTLSConfig(files.GetCertificate)
		out.Certificates = func() []httpd.CertificateInfo {
			name, end := files.Leaf()
			return []httpd.CertificateInfo{{Name: name, NotAfter: end}}
		}
		// The files were read above: every handshake can complete now.
		ready := make(chan struct{})
		close(ready)
		gate.ready, gate.missing = ready, func() []string { return nil }
		return out, gate, nil
	}
	src := certs.NewSource(node.FSM(), key, certs.SourceConfig{Names: out.Names,
		HeldFile: filepath.Join(dataDir, certs.HeldFileName), Logger: log.With("component", "tls")})
	node.FollowCertificates(src)
	out.Config = httpd.NewTLSConfig(src.GetCertificate)
	out.Certificates = func() []httpd.CertificateInfo {
		var list []httpd.CertificateInfo
		for _, c := range src.Served() {
			list = append(list, httpd.CertificateInfo{Name: c.Name, NotAfter: time.UnixMilli(c.NotAfter)})
		}
		return list
	}
	gate.ready, gate.missing = src.Ready(), src.Missing
	return out, gate, nil
}

// httpsGate opens the HTTPS port only once a handshake for every
// configured name can complete (certs.Source.Ready): until then nothing
// listens there and a client's connection is refused, which browsers
// answer by trying the name's next address, where a TLS alert would end
// the visit. A node that kept its certificates opens it at once; a
// brand-new cluster once its first order completes.
type httpsGate struct {
	addr           string
	acme, redirect bool // for the log
	ready          <-chan struct{}
	missing        func() []string

	stop     chan struct{} // closed by close
	mu       sync.Mutex
	closed   bool
	listener net.Listener
}

// listen listens on the HTTPS address at start. The listener is kept when
// the certificates can be served already (listening, as the plain HTTP
// port, before the node says it is ready), else let go at once: a taken
// port or a missing privilege fails the start, not the moment the
// certificates arrive.
func (g *httpsGate) listen() error {
	ln, err := net.Listen("tcp", g.addr)
	if err != nil {
		return fmt.Errorf("listen https: %w", err)
	}
	select {
	case <-g.ready:
		g.listener = ln // not shared yet
		return nil
	default:
		return ln.Close()
	}
}

// serve serves HTTPS with serveTLS (httpd.Server.ServeTLS) on the
// listener listen kept, or on one opened once ready, until close; its
// failure goes to errs. Not ready yet is said in the log once.
func (g *httpsGate) serve(serveTLS func(net.Listener) error, errs chan<- error, log *slog.Logger) {
	if g == nil {
		return
	}
	g.mu.Lock()
	ln := g.listener
	g.mu.Unlock()
	if ln != nil {
		g.serveOn(ln, serveTLS, errs, log)
		return
	}
	log.Info("HTTPS stays closed (connections refused) until a certificate for every name can be served: "+
		"those kept from the last run, else the cluster's state; a brand-new cluster's first order",
		"https", g.addr, "waiting_for", g.missing())
	go func() {
		select {
		case <-g.ready:
		case <-g.stop:
			return
		}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			return
		}
		ln, err := net.Listen("tcp", g.addr)
		if err != nil {
			g.mu.Unlock()
			errs <- fmt.Errorf("listen https: %w", err)
			return
		}
		g.listener = ln
		g.mu.Unlock()
		g.serveOn(ln, serveTLS, errs, log)
	}()
}

func (g *httpsGate) serveOn(ln net.Listener, serveTLS func(net.Listener) error, errs chan<- error, log *slog.Logger) {
	go func() { errs <- serveTLS(ln) }()
	attrs := []any{"https", ln.Addr().String(), "redirect_http", g.redirect, "acme", g.acme}
	if missing := g.missing(); len(missing) > 0 {
		// Ready for a TLS-ALPN-01 validation, which comes through here.
		attrs = append(attrs, "no_certificate_yet", missing)
	}
	log.Info("serving HTTPS", attrs...)
}

// close keeps the HTTPS port from opening from now on, and closes it if
// open: before the server's Shutdown, so no listener opens after it.
func (g *httpsGate) close() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.closed = true
	close(g.stop)
	if g.listener != nil {
		g.listener.Close()
	}
}

// httpsBase is the short URLs' prefix when TLS is on and --base-url is
// not set: the first ACME name, else the advertised host on the HTTPS
// port.
func (t *tlsFlags) httpsBase(advertised string) string {
	if names := splitList(t.acmeDomains); len(names) > 0 {
		return "https://" + strings.ToLower(names[0])
	}
	host, _, err := net.SplitHostPort(advertised)
	if err != nil {
		host = advertised
	}
	if _, port, err := net.SplitHostPort(t.httpsAddr); err == nil && port != "443" {
		host = net.JoinHostPort(host, port)
	}
	return "https://" + host
}
