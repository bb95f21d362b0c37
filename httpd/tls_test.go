package httpd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// selfSignedTLS is a certificate for any name, for a test listener.
func selfSignedTLS(t *testing.T) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sho.rt"}, DNSNames: []string{"sho.rt"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestHTTPS: plain HTTP answers challenges, health and metrics and sends
// the rest to https (308, path and query kept); HTTPS answers carry HSTS
// and name short URLs in https; health warns of a certificate within 7
// days of its end, and metrics show each certificate's end.
func TestHTTPS(t *testing.T) {
	cert := selfSignedTLS(t)
	now := time.Now()
	s := newTestServer(t, func(c *Config) {
		c.BaseURL = "https://sho.rt"
		c.TLS = &TLS{
			Config:       NewTLSConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }),
			Port:         "8443",
			RedirectHTTP: true,
			HSTS:         true,
			Certificates: func() []CertificateInfo {
				return []CertificateInfo{{Name: "soon.example", NotAfter: now.Add(3 * 24 * time.Hour)}, {Name: "later.example", NotAfter: now.Add(60 * 24 * time.Hour)}}
			},
		}
	})
	for deadline := time.Now().Add(10 * time.Second); realNode(s).NotReady() != "" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	plainLn, _ := net.Listen("tcp", "127.0.0.1:0")
	tlsLn, _ := net.Listen("tcp", "127.0.0.1:0")
	go s.Serve(plainLn)
	go s.ServeTLS(tlsLn)
	client := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the test's own certificate
	}
	get := func(url string, header ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Host = "sho.rt"
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	plain, secure := "http://"+plainLn.Addr().String(), "https://"+tlsLn.Addr().String()

	cases := []struct {
		url, location string
		status        int
	}{
		{plain + "/abc?x=1", "https://sho.rt:8443/abc?x=1", http.StatusPermanentRedirect},
		{plain + "/api/v1/urls", "https://sho.rt:8443/api/v1/urls", http.StatusPermanentRedirect},
		{plain + "/health/live", "", http.StatusOK},
		{plain + "/.well-known/acme-challenge/no-such-token", "", http.StatusNotFound},
	}
	for _, tc := range cases {
		resp, _ := get(tc.url)
		if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location {
			t.Errorf("GET %s: %d, Location %q; want %d %q", tc.url, resp.StatusCode, resp.Header.Get("Location"), tc.status, tc.location)
		}
		if resp.Header.Get("Strict-Transport-Security") != "" {
			t.Errorf("GET %s: HSTS over plain HTTP", tc.url)
		}
	}

	resp, body := get(plain+"/health", "Authorization", "Bearer "+testToken) // the names are for authenticated callers
	var h healthJSON
	if err := json.Unmarshal([]byte(body), &h); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d %s", resp.StatusCode, body)
	}
	if strings.Join(h.Warnings, ",") != warningCertificateExpiring || strings.Join(h.CertificatesExpiring, ",") != "soon.example" {
		t.Fatalf("health warnings %v, expiring %v; want certificate_expiring for soon.example only", h.Warnings, h.CertificatesExpiring)
	}
	if _, body := get(plain + "/metrics"); !strings.Contains(body, `linkraft_certificate_expiry_timestamp_seconds{name="later.example"}`) {
		t.Fatal("metrics lack the certificates' ends")
	}

	resp, _ = get(secure + "/health")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Strict-Transport-Security") != hstsValue {
		t.Fatalf("HTTPS health: %d, HSTS %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}
	req, _ := http.NewRequest(http.MethodPost, secure+"/api/v1/urls", strings.NewReader(`{"url":"https://example.com/tls"}`))
	req.Host = "sho.rt"
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	created, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer created.Body.Close()
	var link linkJSON
	if err := json.NewDecoder(created.Body).Decode(&link); err != nil || !strings.HasPrefix(link.ShortURL, "https://sho.rt/") {
		t.Fatalf("a link made over HTTPS: %d %+v %v; want an https short_url", created.StatusCode, link, err)
	}
}

// TestPlainHTTPSendsOnlyToOwnNames: the 308 to https names the request's
// host only when the node serves it (the base URL's host, an ACME domain,
// a registered domain); any other Host is sent to the base URL, or, with
// none set, answered 421 without naming it, so a forged Host never makes
// the node send people to https://<whatever Host said>.
func TestPlainHTTPSendsOnlyToOwnNames(t *testing.T) {
	tlsOn := func(base string) *Server {
		return newTestServer(t, func(c *Config) {
			c.BaseURL = base
			c.TLS = &TLS{Port: "8443", RedirectHTTP: true, Names: []string{"go.example"}}
		})
	}
	withBase, withoutBase := tlsOn("https://sho.rt"), tlsOn("")
	for _, s := range []*Server{withBase, withoutBase} {
		registerDomain(t, s, "links.example")
	}
	cases := []struct {
		name     string
		s        *Server
		host     string
		status   int
		location string
	}{
		{"the base URL's host", withBase, "sho.rt", 308, "https://sho.rt:8443/abc?x=1"},
		{"the base URL's host with a port", withBase, "sho.rt:80", 308, "https://sho.rt:8443/abc?x=1"},
		{"the base URL's host in capitals", withBase, "SHO.RT", 308, "https://sho.rt:8443/abc?x=1"},
		{"an ACME domain", withBase, "go.example", 308, "https://go.example:8443/abc?x=1"},
		{"a registered domain", withBase, "Links.Example:80", 308, "https://links.example:8443/abc?x=1"},
		{"a forged host", withBase, "evil.example", 308, "https://sho.rt:8443/abc?x=1"},
		{"an address", withBase, "192.0.2.7:8080", 308, "https://sho.rt:8443/abc?x=1"},
		{"no host", withBase, "", 308, "https://sho.rt:8443/abc?x=1"},
		{"an ACME domain, no base URL", withoutBase, "go.example", 308, "https://go.example:8443/abc?x=1"},
		{"a registered domain, no base URL", withoutBase, "links.example", 308, "https://links.example:8443/abc?x=1"},
		{"a forged host, no base URL", withoutBase, "evil.example", 421, ""},
		{"no host, no base URL", withoutBase, "", 421, ""},
	}
	for _, tc := range cases {
		ctx := plainGet(tc.s, tc.host, "/abc?x=1")
		got, location := ctx.Response.StatusCode(), string(ctx.Response.Header.Peek("Location"))
		if got != tc.status || location != tc.location {
			t.Errorf("%s (Host %q): %d Location %q; want %d %q", tc.name, tc.host, got, location, tc.status, tc.location)
		}
		if tc.host != "" && strings.Contains(strings.ToLower(string(ctx.Response.Body())), strings.ToLower(tc.host)) {
			t.Errorf("%s (Host %q): the answer names the host: %s", tc.name, tc.host, ctx.Response.Body())
		}
	}
	// Probes, scrapers and the CA's challenges stay on plain HTTP, whatever
	// Host they send.
	for _, path := range []string{"/health", "/health/live", "/health/writes", "/metrics"} {
		if ctx := plainGet(withoutBase, "10.0.0.5:8080", path); ctx.Response.StatusCode() != 200 {
			t.Errorf("GET %s over plain HTTP: %d, want 200", path, ctx.Response.StatusCode())
		}
	}
}

// registerDomain registers name through the node, as POST /admin/domains
// does (over plain HTTP it would be sent to https).
func registerDomain(t *testing.T, s *Server, name string) {
	t.Helper()
	if _, err := s.node.Writes.Propose(context.Background(), fsm.DomainCommand{Domain: fsm.Domain{Name: name}, By: fsm.RootKeyID, Now: time.Now().UnixMilli()}, cluster.ProposeOptions{}); err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
}

// plainGet sends GET uri over plain HTTP with exactly host as its Host
// header ("" sends none), without a credential.
func plainGet(s *Server, host, uri string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5555}, nil)
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.SetHost(host)
	s.Handler(&ctx)
	return &ctx
}
