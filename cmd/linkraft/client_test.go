package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFollowRedirect(t *testing.T) {
	for _, tc := range []struct {
		name          string
		base, path    string
		status        int
		location      string
		followed      bool
		want          string // the new base; "" when refused
		refusalHas    []string
		refusalHasNot []string
	}{
		{name: "308 to the HTTPS port of the same address", base: "http://127.0.0.1:8080", path: "/admin/cluster",
			status: 308, location: "https://127.0.0.1:8443/admin/cluster", want: "https://127.0.0.1:8443"},
		{name: "308 to 443, the port left out", base: "http://lr.example.com", path: "/admin/leave",
			status: 308, location: "https://lr.example.com/admin/leave", want: "https://lr.example.com"},
		{name: "308 from port 80 to 443 named", base: "http://lr.example.com:80", path: "/x?a=1",
			status: 308, location: "https://LR.example.com.:443/x?a=1", want: "https://LR.example.com.:443"},
		{name: "the address's path prefix is kept", base: "http://proxy:8080/linkraft", path: "/admin/cluster",
			status: 308, location: "https://proxy:8443/linkraft/admin/cluster", want: "https://proxy:8443/linkraft"},
		{name: "IPv6 written another way", base: "http://[::1]:8080", path: "/admin/cluster",
			status: 308, location: "https://[0:0::1]:8443/admin/cluster", want: "https://[0:0::1]:8443"},
		{name: "another host", base: "http://127.0.0.1:8080", path: "/admin/cluster", status: 308,
			location: "https://127.0.0.2:8443/admin/cluster", refusalHas: []string{"308", "https://127.0.0.2:8443/admin/cluster", "another host than 127.0.0.1", "use --addr https://…"}},
		{name: "a name for an address", base: "http://127.0.0.1:8080", path: "/admin/cluster", status: 308,
			location: "https://localhost:8443/admin/cluster", refusalHas: []string{"another host"}},
		{name: "a 301, even to https on the same host", base: "http://127.0.0.1:8080", path: "/admin/join", status: 301,
			location: "https://127.0.0.1:8443/admin/join", refusalHas: []string{"301 Moved Permanently", "only a 308", "use --addr https://127.0.0.1:8443"}},
		{name: "a 302", base: "http://127.0.0.1:8080", path: "/admin/cluster", status: 302,
			location: "https://127.0.0.1:8443/admin/cluster", refusalHas: []string{"302 Found", "use --addr https://127.0.0.1:8443"}},
		{name: "308 to plain http", base: "http://127.0.0.1:8080", path: "/admin/cluster", status: 308,
			location: "http://127.0.0.1:9090/admin/cluster", refusalHas: []string{"not https"}},
		{name: "relative Location", base: "http://127.0.0.1:8080", path: "/admin/cluster", status: 308,
			location: "/elsewhere", refusalHas: []string{"http://127.0.0.1:8080/elsewhere", "not https"}},
		{name: "another path", base: "http://127.0.0.1:8080", path: "/admin/leave", status: 308,
			location: "https://127.0.0.1:8443/login", refusalHas: []string{"another path than /admin/leave"}},
		{name: "an https address is never sent on", base: "https://127.0.0.1:8443", path: "/admin/cluster", status: 308,
			location: "https://127.0.0.1:9443/admin/cluster", refusalHas: []string{"only a plain http:// address"}},
		{name: "a second redirect", base: "https://127.0.0.1:8443", path: "/admin/cluster", status: 308, followed: true,
			location: "https://127.0.0.1:8443/admin/cluster", refusalHas: []string{"followed already"}},
		{name: "user information", base: "http://127.0.0.1:8080", path: "/admin/cluster", status: 308,
			location: "https://me:secret@127.0.0.1:8443/admin/cluster", refusalHas: []string{"user information"}, refusalHasNot: []string{"secret"}},
		{name: "no Location", base: "http://127.0.0.1:8080", path: "/admin/cluster", status: 308,
			refusalHas: []string{"without a Location", "use --addr https://…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := followRedirect(tc.base, tc.path, tc.status, tc.location, tc.followed)
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Fatalf("followRedirect = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("followRedirect = %q; want a refusal", got)
			}
			for _, s := range tc.refusalHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("refusal %q does not say %q", err, s)
				}
			}
			for _, s := range tc.refusalHasNot {
				if strings.Contains(err.Error(), s) {
					t.Errorf("refusal %q says %q", err, s)
				}
			}
		})
	}
}

func TestSameHost(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"::1", "0:0:0:0:0:0:0:1", true},
		{"Node1.Example", "node1.example.", true},
		{"127.0.0.1", "127.0.0.2", false},
		{"127.0.0.1", "localhost", false},
		{"node1", "node10", false},
		{"", "", false},
	} {
		if got := sameHost(tc.a, tc.b); got != tc.want {
			t.Errorf("sameHost(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// testPKI is a CA and a certificate it signed for a DNS name only, as a
// node with an operator's certificate has.
type testPKI struct {
	caFile string
	cert   tls.Certificate
}

func newTestPKI(t *testing.T, name string) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "linkraft test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return testPKI{caFile: caFile, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// seen is a request a test server got.
type seen struct {
	method, uri, auth, body string
}

// recorder answers every request with answer and keeps what it got.
type recorder struct {
	answer func(w http.ResponseWriter, r *http.Request)
	mu     sync.Mutex
	got    []seen
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.got = append(rec.got, seen{r.Method, r.RequestURI, r.Header.Get("Authorization"), string(body)})
	rec.mu.Unlock()
	rec.answer(w, r)
}

func (rec *recorder) requests() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.got...)
}

// httpsNode is a node serving HTTPS with a certificate for linkraft.test
// only, whose plain HTTP answers everything with a 308 to it, as a node
// with TLS and --http-redirect does.
type httpsNode struct {
	pki           testPKI
	tls, plain    *recorder
	httpsAddr     string // 127.0.0.1:port
	plainAddr     string
	httpsPort     string
	clusterAnswer string
}

func startHTTPSNode(t *testing.T) *httpsNode {
	t.Helper()
	n := &httpsNode{pki: newTestPKI(t, "linkraft.test"), clusterAnswer: clusterJSON("leader", time.Now())}
	n.tls = &recorder{answer: func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /admin/cluster", "POST /admin/join", "POST /admin/leadership-transfer":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, n.clusterAnswer)
		case "GET /api/v1/urls":
			next := map[string]string{"": `"2"`, "2": "null"}[r.URL.Query().Get("cursor")]
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"links":[{"short_code":"c`+r.URL.Query().Get("cursor")+`","workspace":"w","original_url":"https://x.example/"}],"next_cursor":`+next+`}`)
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"status":404,"detail":"no server with that id in the cluster"}`)
		}
	}}
	secure := httptest.NewUnstartedServer(n.tls)
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{n.pki.cert}}
	secure.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are what some cases test
	secure.StartTLS()
	t.Cleanup(secure.Close)
	n.httpsAddr = secure.Listener.Addr().String()
	_, n.httpsPort, _ = net.SplitHostPort(n.httpsAddr)
	n.plain = &recorder{answer: func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		http.Redirect(w, r, "https://"+net.JoinHostPort(host, n.httpsPort)+r.URL.RequestURI(), http.StatusPermanentRedirect)
	}}
	plain := httptest.NewServer(n.plain)
	t.Cleanup(plain.Close)
	n.plainAddr = plain.Listener.Addr().String()
	return n
}

// clearConnEnv keeps the developer's environment out of a test.
func clearConnEnv(t *testing.T) {
	t.Helper()
	for _, name := range []string{"LINKRAFT_ADDR", "LINKRAFT_CA_FILE", "LINKRAFT_SERVER_NAME", "LINKRAFT_KEY", "LINKRAFT_ADMIN_TOKEN", "LINKRAFT_TIMEOUT"} {
		t.Setenv(name, "") // restored after the test
		os.Unsetenv(name)
	}
}

func TestHTTPSNode(t *testing.T) {
	clearConnEnv(t)
	n := startHTTPSNode(t)
	trust := []string{"--ca-file", n.pki.caFile, "--server-name", "linkraft.test"}
	https := "https://" + n.httpsAddr

	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		code     int
		stdout   string   // in stdout; "" for an empty one
		stderr   []string // each in stderr
		noStderr bool
	}{
		{name: "https, trusted and named", args: append([]string{"status", "--addr", https}, trust...),
			code: 0, stdout: "answered by:", noStderr: true},
		{name: "the same from the environment", args: []string{"status"},
			env:  map[string]string{"LINKRAFT_ADDR": https, "LINKRAFT_CA_FILE": n.pki.caFile, "LINKRAFT_SERVER_NAME": "linkraft.test"},
			code: 0, stdout: "answered by:", noStderr: true},
		{name: "an IP address the certificate does not hold", args: []string{"status", "--addr", https, "--ca-file", n.pki.caFile},
			code: 1, stderr: []string{"cannot verify the certificate of " + https, "x509: cannot validate certificate for 127.0.0.1",
				"hint: the node's certificate is for linkraft.test: give --server-name linkraft.test (LINKRAFT_SERVER_NAME)"}},
		{name: "a CA the client does not know", args: []string{"status", "--addr", https, "--server-name", "linkraft.test"},
			code: 1, stderr: []string{"x509: certificate signed by unknown authority", "--ca-file (LINKRAFT_CA_FILE)"}},
		{name: "another name", args: []string{"status", "--addr", https, "--ca-file", n.pki.caFile, "--server-name", "other.test"},
			code: 1, stderr: []string{"x509: certificate is valid for linkraft.test, not other.test"}},
		{name: "plain http followed once to https", args: append([]string{"status", "--addr", "http://" + n.plainAddr, "--admin-token", "tok"}, trust...),
			code: 0, stdout: "answered by:", stderr: []string{"linkraft status: http://" + n.plainAddr + " answered 308 Permanent Redirect to https; going on at " + https +
				". --addr " + https + " goes there directly, without sending the credential over plain HTTP first.\n"}},
		{name: "the redirect is checked as --addr https is", args: []string{"status", "--addr", "http://" + n.plainAddr},
			code: 1, stderr: []string{"going on at " + https, "x509: cannot validate certificate for 127.0.0.1"}},
		{name: "https to the plain HTTP port", args: append([]string{"status", "--addr", "https://" + n.plainAddr}, trust...),
			code: 1, stderr: []string{"cannot reach https://" + n.plainAddr, "plain HTTP, not TLS: use --addr http://"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runCmd(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, tc.code, stdout, stderr)
			}
			if tc.stdout == "" && stdout != "" || !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout %q, want %q in it", stdout, tc.stdout)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr %q, want %q in it", stderr, s)
				}
			}
			if tc.noStderr && stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
		})
	}
}

// TestRedirectFollowedOncePerCommand: a command of several requests
// hears of the redirect once, sends each request once over HTTPS with its
// method, body and credential, and sends only the first over plain HTTP.
func TestRedirectFollowedOncePerCommand(t *testing.T) {
	clearConnEnv(t)
	n := startHTTPSNode(t)
	t.Setenv("LINKRAFT_CA_FILE", n.pki.caFile)
	t.Setenv("LINKRAFT_SERVER_NAME", "linkraft.test")
	t.Setenv("LINKRAFT_ADDR", n.plainAddr) // host:port is http

	code, stdout, stderr := runCmd(t, "join", "--key", "lr_k", "--id", "n4", "--raft-addr", "10.0.0.4:8081")
	if code != 0 || !strings.HasPrefix(stdout, "joined n4") || strings.Count(stderr, "answered 308") != 1 {
		t.Fatalf("join: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	got := n.tls.requests()
	if len(got) != 1 || got[0].method != "POST" || got[0].uri != "/admin/join" || got[0].auth != "Bearer lr_k" ||
		got[0].body != `{"http_addr":"","id":"n4","raft_addr":"10.0.0.4:8081"}` {
		t.Fatalf("over HTTPS: %+v", got)
	}

	code, stdout, stderr = runCmd(t, "links", "list", "--all", "--limit", "1", "--key", "lr_k")
	if code != 0 || !strings.Contains(stdout, "c2") || strings.Count(stderr, "answered 308") != 1 {
		t.Fatalf("links list --all: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if plain := n.plain.requests(); len(plain) != 2 { // join's and list's first
		t.Errorf("plain HTTP got %d requests, want the first of each command: %+v", len(plain), plain)
	}
	if pages := n.tls.requests()[1:]; len(pages) != 2 {
		t.Errorf("HTTPS got %d list requests, want the 2 pages: %+v", len(pages), pages)
	}
}

// TestRedirectsRefused: every 3xx but the upgrade to HTTPS on the same
// host fails the command, whatever it is, and nothing is sent to where it
// pointed.
func TestRedirectsRefused(t *testing.T) {
	clearConnEnv(t)
	n := startHTTPSNode(t)
	// Where a redirect to another host points, by another name than the
	// 127.0.0.1 of --addr: it must never be reached.
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reached := 0
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			reached++
			mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { other.Close() })

	var location string
	status := http.StatusPermanentRedirect
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		loc, code := location, status
		mu.Unlock()
		w.Header().Set("Location", strings.ReplaceAll(loc, "PATH", r.URL.RequestURI()))
		w.WriteHeader(code)
	}))
	t.Cleanup(redirector.Close)
	_, httpsPort, _ := net.SplitHostPort(n.httpsAddr)
	host := "http://" + redirector.Listener.Addr().String()

	commands := [][]string{
		{"status"}, {"leave", "--id", "n2"}, {"transfer"}, {"join", "--id", "n4", "--raft-addr", "10.0.0.4:8081"},
		{"promote", "--id", "n4"}, {"keys", "revoke", "k1"}, {"keys", "list"}, {"links", "get", "abc"}, {"links", "delete", "abc"},
		{"backup", "-o", filepath.Join(t.TempDir(), "b")}, {"health"},
	}
	for _, tc := range []struct {
		name     string
		status   int
		location string
		says     string
	}{
		{"another host", 308, "https://" + net.JoinHostPort("localhost", portOf(other)) + "PATH", "another host than 127.0.0.1"},
		{"a 301 to https", 301, "https://127.0.0.1:" + httpsPort + "PATH", "use --addr https://127.0.0.1:" + httpsPort},
		{"a 307", 307, "https://127.0.0.1:" + httpsPort + "PATH", "only a 308"},
		{"a 308 to http", 308, "http://127.0.0.1:1PATH", "not https"},
		{"a 300", 300, "", "without a Location"},
	} {
		mu.Lock()
		status, location = tc.status, tc.location
		mu.Unlock()
		for _, cmd := range commands {
			args := append(append([]string{}, cmd...), "--addr", host, "--ca-file", n.pki.caFile, "--server-name", "linkraft.test")
			code, stdout, stderr := runCmd(t, args...)
			if code != 1 || stdout != "" || !strings.Contains(stderr, tc.says) || !strings.Contains(stderr, "use --addr https://") {
				t.Errorf("%s, %s: exit %d, stdout %q, stderr %q; want 1, nothing printed and %q", tc.name, strings.Join(cmd, " "), code, stdout, stderr, tc.says)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if reached != 0 {
		t.Errorf("the other host was connected to %d times", reached)
	}
	if got := n.tls.requests(); len(got) != 0 {
		t.Errorf("a refused redirect was followed: %+v", got)
	}
}

// TestSecondRedirectRefused: the HTTPS side redirecting again ends the
// command there.
func TestSecondRedirectRefused(t *testing.T) {
	clearConnEnv(t)
	n := startHTTPSNode(t)
	n.tls.answer = func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://127.0.0.1:1"+r.URL.RequestURI(), http.StatusPermanentRedirect)
	}
	code, stdout, stderr := runCmd(t, "leave", "--id", "n2", "--addr", "http://"+n.plainAddr, "--ca-file", n.pki.caFile, "--server-name", "linkraft.test")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "a redirect was followed already") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestConnectionFlagErrors(t *testing.T) {
	clearConnEnv(t)
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"missing CA file", []string{"--ca-file", filepath.Join(t.TempDir(), "missing.pem")}, "--ca-file: open"},
		{"CA file without a certificate", []string{"--ca-file", notPEM}, "no PEM certificate"},
		{"server name with a port", []string{"--server-name", "linkraft.test:443"}, "without a port"},
		{"server name as a URL", []string{"--server-name", "https://linkraft.test"}, "want a host name"},
	} {
		for _, cmd := range [][]string{{"status"}, {"links", "list"}, {"health"}} {
			args := append(append(append([]string{}, cmd...), "--addr", "https://127.0.0.1:1"), tc.args...)
			code, stdout, stderr := runCmd(t, args...)
			if code != 2 || stdout != "" || !strings.Contains(stderr, tc.says) {
				t.Errorf("%s, %s: exit %d, stdout %q, stderr %q; want 2 and %q", tc.name, strings.Join(cmd, " "), code, stdout, stderr, tc.says)
			}
		}
	}
}

// TestEveryClientCommandTakesTheConnectionFlags: one declaration, so every
// command that talks to a node has all of them, with their environment
// variables named in the help.
func TestEveryClientCommandTakesTheConnectionFlags(t *testing.T) {
	for _, cmd := range [][]string{
		{"status"}, {"join"}, {"leave"}, {"promote"}, {"transfer"}, {"backup"}, {"restore"}, {"import"}, {"health"},
		{"keys", "create"}, {"keys", "list"}, {"keys", "revoke"},
		{"links", "create"}, {"links", "list"}, {"links", "get"}, {"links", "edit"}, {"links", "history"}, {"links", "delete"},
	} {
		code, _, stderr := runCmd(t, append(cmd, "-h")...)
		if code != 0 {
			t.Errorf("%s -h: exit %d", strings.Join(cmd, " "), code)
		}
		for _, want := range []string{"-addr", "LINKRAFT_ADDR", "-ca-file", "LINKRAFT_CA_FILE", "-server-name", "LINKRAFT_SERVER_NAME", "-timeout"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s -h does not mention %s", strings.Join(cmd, " "), want)
			}
		}
	}
}

func portOf(ln net.Listener) string {
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
