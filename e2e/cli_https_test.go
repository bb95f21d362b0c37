package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeNamedCert makes a CA and a certificate it signs for the DNS name
// only, with no IP address in it, as an operator's certificate for a
// node's public name is.
func writeNamedCert(t *testing.T, dir, name string) (certFile, keyFile, caFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e CLI test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, b []byte) string {
		path := filepath.Join(dir, file)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("cert.pem", "CERTIFICATE", der), write("key.pem", "PRIVATE KEY", keyDER), write("ca.pem", "CERTIFICATE", caDER)
}

// cliRun is one run of a client subcommand as a user sees it.
type cliRun struct {
	code           int
	stdout, stderr string
}

func (r cliRun) String() string {
	return "exit " + itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

func runClientCommand(t *testing.T, env []string, args ...string) cliRun {
	t.Helper()
	var stdout, stderr lockedBuffer
	err := runBinary(t, 30*time.Second, env, &stdout, &stderr, args...)
	if err != nil && exitCode(err) < 0 {
		t.Fatalf("linkraft %s: %v", strings.Join(args, " "), err)
	}
	return cliRun{code: exitCode(err), stdout: stdout.String(), stderr: stderr.String()}
}

// TestCLIOverHTTPS: against a node serving HTTPS with a certificate for a
// name only (a private CA's), whose plain HTTP answers 308 to https, every
// client command reaches it by its https address given the CA and the
// name, follows the 308 of its plain http address once and says so, and
// fails, saying why, where it did nothing: an unverified certificate, a
// refusal of the node, a redirect anywhere else.
func TestCLIOverHTTPS(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	const name = "linkraft.test"
	certFile, keyFile, caFile := writeNamedCert(t, t.TempDir(), name)
	httpsAddr := net.JoinHostPort("127.0.0.1", itoa(freePort(t, false)))
	n := startNode(t, nodeOptions{Settings: map[string]string{"https-addr": httpsAddr, "tls-cert": certFile, "tls-key": keyFile}})
	plainURL, httpsURL := "http://"+n.httpAddr, "https://"+httpsAddr

	// What the CLI meets: plain HTTP sends the admin API to https.
	if r := n.get(t, "/admin/cluster"); r.status != http.StatusPermanentRedirect || r.header.Get("Location") != httpsURL+"/admin/cluster" {
		t.Fatalf("plain GET /admin/cluster: %v Location %q; want 308 to %s/admin/cluster", r, r.header.Get("Location"), httpsURL)
	}

	token := "LINKRAFT_ADMIN_TOKEN=" + n.credential
	trust := []string{"--ca-file", caFile, "--server-name", name}
	withTrust := func(args ...string) []string { return append(args, trust...) }
	isStatus := func(r cliRun) bool {
		return strings.Contains(r.stdout, "answered by:") && strings.Contains(r.stdout, "leader:") && strings.Contains(r.stdout, n.id)
	}

	t.Run("a plain http address follows the 308 once and says so", func(t *testing.T) {
		r := runClientCommand(t, []string{token}, withTrust("status", "--addr", plainURL)...)
		if r.code != 0 || !isStatus(r) {
			t.Fatalf("want the status and exit 0; %v", r)
		}
		// "answered 308", not "308": a port may hold those digits.
		if strings.Count(r.stderr, "answered 308") != 1 || !strings.Contains(r.stderr, "going on at "+httpsURL) || !strings.Contains(r.stderr, "--addr "+httpsURL) {
			t.Errorf("stderr does not say once that it went on at %s: %q", httpsURL, r.stderr)
		}
		if strings.Contains(r.stdout, "308 Permanent") || strings.Contains(r.stdout, "Redirect") {
			t.Errorf("the redirect is printed as the result: %q", r.stdout)
		}
	})

	t.Run("an https address without the CA and the name fails on the certificate", func(t *testing.T) {
		r := runClientCommand(t, []string{token}, "status", "--addr", httpsURL)
		if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "x509: cannot validate certificate for 127.0.0.1") ||
			!strings.Contains(r.stderr, "--server-name "+name) {
			t.Fatalf("want a non-zero exit, nothing printed, the x509 error and a hint at --server-name %s; %v", name, r)
		}
		r = runClientCommand(t, []string{token}, "status", "--addr", httpsURL, "--server-name", name)
		if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "x509: certificate signed by unknown authority") ||
			!strings.Contains(r.stderr, "--ca-file") {
			t.Fatalf("named but not trusted: want a non-zero exit, the x509 error and a hint at --ca-file; %v", r)
		}
		// Followed from plain http, the same checks.
		r = runClientCommand(t, []string{token}, "status", "--addr", plainURL)
		if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "x509: cannot validate certificate for 127.0.0.1") {
			t.Fatalf("followed without the CA: want the x509 error; %v", r)
		}
	})

	t.Run("an https address with the CA and the name", func(t *testing.T) {
		r := runClientCommand(t, []string{token}, withTrust("status", "--addr", httpsURL)...)
		if r.code != 0 || !isStatus(r) || r.stderr != "" {
			t.Fatalf("want the status, exit 0 and nothing on stderr; %v", r)
		}
	})

	t.Run("the same from the environment", func(t *testing.T) {
		env := []string{token, "LINKRAFT_ADDR=" + httpsURL, "LINKRAFT_CA_FILE=" + caFile, "LINKRAFT_SERVER_NAME=" + name}
		if r := runClientCommand(t, env, "status"); r.code != 0 || !isStatus(r) || r.stderr != "" {
			t.Fatalf("want the status, exit 0 and nothing on stderr; %v", r)
		}
		if r := runClientCommand(t, env[:3], "status"); r.code == 0 || !strings.Contains(r.stderr, "x509") {
			t.Fatalf("without LINKRAFT_SERVER_NAME: want the x509 error; %v", r)
		}
	})

	t.Run("links round trip over https", func(t *testing.T) {
		env := []string{token, "LINKRAFT_ADDR=" + httpsURL, "LINKRAFT_CA_FILE=" + caFile, "LINKRAFT_SERVER_NAME=" + name}
		r := runClientCommand(t, env, "links", "create", "https://example.com/over-https", "--code", "over-https")
		if r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), "/over-https") {
			t.Fatalf("links create: %v", r)
		}
		r = runClientCommand(t, env, "links", "list")
		if r.code != 0 || !strings.Contains(r.stdout, "over-https") || !strings.Contains(r.stdout, "https://example.com/over-https") {
			t.Fatalf("links list: %v", r)
		}
		// From the plain address: one notice, the same answer.
		r = runClientCommand(t, []string{token}, withTrust("links", "get", "over-https", "--addr", plainURL)...)
		if r.code != 0 || !strings.Contains(r.stdout, "https://example.com/over-https") || strings.Count(r.stderr, "answered 308") != 1 {
			t.Fatalf("links get through the 308: %v", r)
		}
	})

	t.Run("admin commands the node refuses never exit 0", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			says string
		}{
			{[]string{"leave", "--id", "no-such-node"}, "404"},
			{[]string{"promote", "--id", "no-such-node"}, "404"},
			{[]string{"transfer"}, "409"}, // a single node: no other voter
			{[]string{"keys", "revoke", "no-such-key"}, "404"},
			{[]string{"links", "delete", "no-such-code"}, "404"},
		} {
			for _, addr := range []string{plainURL, httpsURL} {
				r := runClientCommand(t, []string{token}, withTrust(append(tc.args, "--addr", addr)...)...)
				if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "linkraft "+tc.args[0]) || !strings.Contains(r.stderr, tc.says) {
					t.Errorf("%s at %s: want a non-zero exit, nothing printed and %s on stderr; %v", strings.Join(tc.args, " "), addr, tc.says, r)
				}
			}
		}
	})

	t.Run("other redirects are refused, not followed", func(t *testing.T) {
		// Where a redirect to another host points: never reached.
		other, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Fatalf("listen on 127.0.0.2: %v", err)
		}
		defer other.Close()
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
		cases := []struct {
			name     string
			status   int
			location string
			says     string
		}{
			{"a 308 to another host", http.StatusPermanentRedirect, "https://" + other.Addr().String(), "another host than 127.0.0.1"},
			{"a 301 to the node's https", http.StatusMovedPermanently, httpsURL, "use --addr " + httpsURL},
			{"a 302 to the node's https", http.StatusFound, httpsURL, "use --addr " + httpsURL},
		}
		var current int
		redirector := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			tc := cases[current]
			mu.Unlock()
			w.Header().Set("Location", tc.location+r.URL.RequestURI())
			w.WriteHeader(tc.status)
		})}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go redirector.Serve(ln)
		defer redirector.Close()
		for i, tc := range cases {
			mu.Lock()
			current = i
			mu.Unlock()
			for _, args := range [][]string{{"status"}, {"join", "--id", "n9", "--raft-addr", "127.0.0.1:1"}, {"leave", "--id", "node1"}, {"transfer"}, {"links", "list"}} {
				r := runClientCommand(t, []string{token}, withTrust(append(args, "--addr", "http://"+ln.Addr().String())...)...)
				if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "not followed") || !strings.Contains(r.stderr, tc.says) {
					t.Errorf("%s, %s: want a non-zero exit, nothing printed, and %q; %v", tc.name, strings.Join(args, " "), tc.says, r)
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if reached != 0 {
			t.Errorf("the other host was connected to %d times", reached)
		}
		// node1 is still there: the leave sent to the redirector went nowhere.
		if r := runClientCommand(t, []string{token}, withTrust("status", "--addr", httpsURL)...); r.code != 0 || !isStatus(r) {
			t.Errorf("status after the refused redirects: %v", r)
		}
	})
}

// TestBackupScriptOverHTTPS: the nightly backup script (deploy/
// linkraft-backup.sh), run with the environment file of a node that serves
// HTTPS, asks the node's HTTPS port under the name its certificate holds
// and saves a backup; told to ask the plain HTTP port, which answers with
// a redirect, it fails saying so instead of saving nothing silently.
func TestBackupScriptOverHTTPS(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	const name = "linkraft.test"
	certFile, keyFile, caFile := writeNamedCert(t, t.TempDir(), name)
	httpsAddr := net.JoinHostPort("127.0.0.1", itoa(freePort(t, false)))
	n := startNode(t, nodeOptions{Settings: map[string]string{"https-addr": httpsAddr, "tls-cert": certFile, "tls-key": keyFile}})
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "deploy", "linkraft-backup.sh")
	dir := t.TempDir()
	// What /etc/linkraft.env holds on such a node, and the CA's bundle.
	env := []string{
		"LINKRAFT_ADMIN_TOKEN=" + n.credential, "LINKRAFT_BACKUP_DIR=" + dir,
		"LINKRAFT_HTTP_ADDR=" + n.httpAddr, "LINKRAFT_HTTPS_ADDR=" + httpsAddr,
		"LINKRAFT_TLS_CERT=" + certFile, "LINKRAFT_TLS_KEY=" + keyFile,
		"LINKRAFT_SERVER_NAME=" + name, "LINKRAFT_CA_FILE=" + caFile,
	}
	run := func(extra ...string) (string, error) {
		cmd := exec.Command("sh", script)
		cmd.Env = append(append(os.Environ(), env...), extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(); err != nil {
		t.Fatalf("the backup script over HTTPS: %v\n%s", err, out)
	}
	saved, err := filepath.Glob(filepath.Join(dir, "linkraft-*.backup"))
	if err != nil || len(saved) != 1 {
		t.Fatalf("saved %v (%v), want one backup", saved, err)
	}
	if b, err := os.ReadFile(saved[0]); err != nil || !strings.HasPrefix(string(b), "LKRB") {
		t.Fatalf("%s is not a linkraft backup (%v)", saved[0], err)
	}
	out, err := run("LINKRAFT_ADDR=http://" + n.httpAddr)
	if err == nil || !strings.Contains(out, "answered 308") || !strings.Contains(out, "LINKRAFT_ADDR=https://") {
		t.Fatalf("asked the plain HTTP port: %v\n%s\nwant a failure naming the redirect and what to set", err, out)
	}
}
