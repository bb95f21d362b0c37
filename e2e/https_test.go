package e2e

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// HTTPS with certificates from a real ACME CA: Debian's pebble (Let's
// Encrypt's RFC 8555 test server) and pebble-challtestsrv, whose DNS
// gives each name every node's address, as round-robin DNS does. The CA
// validates through whichever node it reaches.

// acmeCA is a running pebble and its DNS.
type acmeCA struct {
	directory string // the ACME directory URL
	caRoot    string // PEM file: the CA of pebble's own HTTPS listener
	mgmt      string // challtestsrv's management address
	roots     *x509.CertPool
	// The certificate and key of pebble's own HTTPS listener, and its CA
	// as a pool, for onlyTLSALPN's listener.
	listenerCert, listenerKey string
	listenerCAs               *x509.CertPool
}

// startACMECA starts pebble-challtestsrv and pebble, on 127.0.0.1, for
// nodes whose plain HTTP listens on httpPort (HTTP-01) and HTTPS on
// tlsPort (TLS-ALPN-01). Their absence is a failure, not a skip: make deps
// installs Debian's pebble.
func startACMECA(t *testing.T, httpPort, tlsPort int) *acmeCA {
	t.Helper()
	pebble, err := exec.LookPath("pebble")
	if err != nil {
		t.Fatal("no pebble on PATH: the HTTPS test runs Debian's pebble, an ACME test CA; install it with `apt-get install pebble` (make deps does)")
	}
	challtest, err := exec.LookPath("pebble-challtestsrv")
	if err != nil {
		t.Fatalf("pebble-challtestsrv: %v", err)
	}
	dir := t.TempDir()
	certFile, keyFile, caFile := writeListenerCert(t, dir)
	dnsPort, mgmtPort := freePort(t, true), freePort(t, false)
	ca := &acmeCA{caRoot: caFile, mgmt: fmt.Sprintf("127.0.0.1:%d", mgmtPort), listenerCert: certFile, listenerKey: keyFile}
	runTool(t, challtest, nil, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
		"-dns01", fmt.Sprintf("127.0.0.1:%d", dnsPort), "-management", ca.mgmt, "-http01", "", "-https01", "", "-tlsalpn01", "")
	listen, pebbleMgmt := fmt.Sprintf("127.0.0.1:%d", freePort(t, false)), fmt.Sprintf("127.0.0.1:%d", freePort(t, false))
	config := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": pebbleMgmt,
		"certificate": certFile, "privateKey": keyFile,
		"httpPort": httpPort, "tlsPort": tlsPort,
		"ocspResponderURL": "", "externalAccountBindingRequired": false,
	}}
	configFile := filepath.Join(dir, "pebble.json")
	data, _ := json.Marshal(config)
	if err := os.WriteFile(configFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// No pause before validating, and no nonce refused at random: the
	// test is about the cluster, not about retrying a flaky CA.
	runTool(t, pebble, []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0"},
		"-config", configFile, "-dnsserver", fmt.Sprintf("127.0.0.1:%d", dnsPort))
	ca.directory = "https://" + listen + "/dir"
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(caPEM)
	ca.listenerCAs = pool
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if !eventually(10*time.Second, func() bool {
		resp, err := client.Get(ca.directory)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}) {
		t.Fatal("pebble did not answer its directory within 10 s")
	}
	// The root that signs the certificates pebble issues (made at its start).
	resp, err := client.Get("https://" + pebbleMgmt + "/roots/0")
	if err != nil {
		t.Fatalf("pebble's root: %v", err)
	}
	defer resp.Body.Close()
	root, _ := io.ReadAll(resp.Body)
	ca.roots = x509.NewCertPool()
	if !ca.roots.AppendCertsFromPEM(root) {
		t.Fatalf("pebble's root is not PEM: %q", root)
	}
	return ca
}

// runTool starts a helper process for the test's duration.
func runTool(t *testing.T, bin string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("output of %s:\n%s", filepath.Base(bin), tail(out.String(), 4000))
		}
	})
}

// resolve makes the CA's DNS answer name with addrs.
func (ca *acmeCA) resolve(t *testing.T, name string, addrs ...string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"host": name, "addresses": addrs})
	resp, err := http.Post("http://"+ca.mgmt+"/add-a", "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("challtestsrv add-a %s: %v %v", name, resp, err)
	}
	resp.Body.Close()
}

// writeListenerCert makes a CA and a certificate it signs for ips
// (127.0.0.1 when none), for an HTTPS listener of the test's own: pebble's,
// or linkraft's --tls-cert.
func writeListenerCert(t *testing.T, dir string, ips ...string) (certFile, keyFile, caFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e pebble listener CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if len(ips) == 0 {
		ips = []string{"127.0.0.1"}
	}
	var addrs []net.IP
	for _, ip := range ips {
		addrs = append(addrs, net.ParseIP(ip))
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ips[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: addrs, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	write := func(name, typ string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("cert.pem", "CERTIFICATE", der), write("key.pem", "PRIVATE KEY", keyDER), write("ca.pem", "CERTIFICATE", caDER)
}

// portOnAll is a TCP port free on every one of ips.
func portOnAll(t *testing.T, ips ...string) int {
	t.Helper()
	for range 50 {
		port := freePortOn(t, ips[0], false)
		free := true
		for _, ip := range ips[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, itoa(port)))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return port
		}
	}
	t.Fatalf("no port free on all of %v", ips)
	return 0
}

// servedCertificate is the certificate addr serves for name, verified
// against roots; an error when the handshake fails or it does not verify.
func servedCertificate(addr, name string, roots *x509.CertPool) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// TestHTTPSWithACME: three nodes behind one name get one certificate for
// it, ordered once, each serving it; a domain registered later gets its
// own without a restart, even when its order's leader is killed
// mid-order; a fourth node serves both as soon as it is ready; a name
// neither configured nor registered orders nothing; plain HTTP answers
// challenges, health and metrics and sends the rest to https.
func TestHTTPSWithACME(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"}
	const proxyIP = "127.0.0.5" // what the CA reaches for a later name (a heldLink)
	httpPort, httpsPort := portOnAll(t, append(ips, proxyIP)...), portOnAll(t, ips...)
	ca := startACMECA(t, httpPort, freePort(t, false))
	const base, later = "s.linkraft.test", "go.linkraft.test"
	ca.resolve(t, base, ips[:3]...)

	nodes, gossip := nodesOnAddresses(t, ips, httpPort)
	launch := func(i int, settings map[string]string) {
		all := map[string]string{"join": strings.Join(gossip[:3], ","), "bootstrap-expect": "3",
			"https-addr": net.JoinHostPort(ips[i], itoa(httpsPort)), "acme-domains": base, "acme-email": "ops@linkraft.test",
			"acme-directory": ca.directory, "acme-ca-root": ca.caRoot, "http-redirect": "false"}
		for k, v := range settings {
			all[k] = v
		}
		nodes[i].args, nodes[i].env = nodes[i].commandLine(nodeOptions{Settings: all})
		nodes[i].launch()
	}
	for i := range 3 {
		launch(i, map[string]string{"http-redirect": strings.ToLower(fmt.Sprint(i == 2))})
	}
	for _, n := range nodes[:3] {
		if err := n.waitReady(leaderKnown); err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
	}
	httpsAddr := func(i int) string { return net.JoinHostPort(ips[i], itoa(httpsPort)) }
	waitServed := func(i int, name string, within time.Duration) *x509.Certificate {
		t.Helper()
		var cert *x509.Certificate
		var err error
		if !eventually(within, func() bool { cert, err = servedCertificate(httpsAddr(i), name, ca.roots); return err == nil }) {
			t.Fatalf("%s does not serve a certificate for %s within %v: %v", nodes[i].id, name, within, err)
		}
		return cert
	}
	first := waitServed(0, base, 90*time.Second)
	for i := 1; i < 3; i++ {
		if got := waitServed(i, base, 10*time.Second); !got.Equal(first) {
			t.Fatalf("%s serves another certificate for %s than %s", nodes[i].id, base, nodes[0].id)
		}
	}

	// Plain HTTP on node3 (--http-redirect): 308 to https, path and query
	// kept, to a name the node serves: the one asked for when it is one
	// (an ACME name here), else the short URLs' (the first ACME name),
	// never the node's address or whatever the Host header said; health
	// and metrics stay.
	want := "https://" + net.JoinHostPort(base, itoa(httpsPort)) + "/abc?x=1"
	for _, host := range []string{"", base, "evil.example", strings.ToUpper(base) + ":80"} {
		r := nodes[2].request(t, http.MethodGet, "/abc?x=1", http.Header{"Host": {host}}, nil)
		if r.status != http.StatusPermanentRedirect || r.header.Get("Location") != want {
			t.Fatalf("plain HTTP with --http-redirect, Host %q: %v Location %q; want 308 to %s", host, r, r.header.Get("Location"), want)
		}
	}
	if r := nodes[2].get(t, "/metrics"); r.status != http.StatusOK || !strings.Contains(string(r.body), `linkraft_certificate_expiry_timestamp_seconds{name="`+base+`"}`) {
		t.Fatalf("/metrics over plain HTTP: %v", r.status)
	}

	// A domain registered later: its order's leader is killed as soon as
	// it placed the order; the next leader finishes it. The name's DNS
	// answers with a proxy that holds the CA's validation until the
	// leader is dead and then passes it to a survivor (as health-checked
	// DNS would list the survivors only): the CA, which does not pause
	// before validating, could otherwise finish the order before the kill.
	leader, _ := waitOneLeader(t, leaderWaitTimeout, nodes[:3]...)
	var survivor string
	for i, n := range nodes[:3] {
		if n != leader {
			survivor = ips[i]
		}
	}
	hold := newHeldLink(t, net.JoinHostPort(proxyIP, itoa(httpPort)), 0)
	hold.serve(net.JoinHostPort(survivor, itoa(httpPort)))
	ca.resolve(t, later, proxyIP)
	// Through node1: node3's plain HTTP redirects to https (admin calls go
	// to the leader from any node).
	if r := nodes[0].postJSON(t, "/admin/domains", map[string]any{"domain": later}); r.status != http.StatusOK && r.status != http.StatusCreated {
		t.Fatalf("register %s: %v", later, r)
	}
	// The leader's log line for the order is the event it is killed on;
	// without it the case cannot run, which fails rather than passes.
	if !eventually(30*time.Second, func() bool { return acmeLogs(leader.out.String(), "order placed", later) > 0 }) {
		t.Fatalf("%s, the leader, placed no order for %s within 30 s: its death mid-order cannot be tested\n%s",
			leader.id, later, tail(leader.out.String(), 3000))
	}
	leader.kill9()
	// kill9 returns once the process is gone and all it wrote is read.
	if acmeLogs(leader.out.String(), "certificate obtained", later) > 0 {
		t.Fatalf("%s obtained the certificate for %s before it was killed: it did not die mid-order", leader.id, later)
	}
	hold.let()
	for i, n := range nodes[:3] {
		if n != leader {
			waitServed(i, later, 90*time.Second)
		}
	}
	if hold.relayed() == 0 {
		t.Fatalf("the CA validated %s without the proxy: the leader's death mid-order was not what the test made it", later)
	}
	orders := 0
	for _, n := range nodes[:3] {
		orders += acmeLogs(n.out.String(), "order placed", later)
	}
	if orders > 2 {
		t.Fatalf("%d orders placed for %s; a leader change may add one at most", orders, later)
	}

	// A fourth node serves both names as soon as it is ready.
	launch(3, map[string]string{"bootstrap-expect": "0", "join": strings.Join(gossip[:3], ",")})
	if err := nodes[3].waitReady(func(h health) bool { return h.Status == "healthy" }); err != nil {
		t.Fatalf("node4: %v", err)
	}
	for _, name := range []string{base, later} {
		if _, err := servedCertificate(httpsAddr(3), name, ca.roots); err != nil {
			t.Fatalf("node4, ready, does not serve %s at once: %v", name, err)
		}
	}

	// A name no one configured or registered, asked of every node (the
	// leader, which orders, among them): no certificate, no order. The
	// killed node comes back first: a domain is registered below, which
	// waits for every server to be known to apply it.
	leader.restartUntil(writable)
	const unknown = "evil.linkraft.test"
	probeUnknown := func() {
		t.Helper()
		for i, n := range nodes {
			if _, err := servedCertificate(httpsAddr(i), unknown, ca.roots); err == nil {
				t.Fatalf("%s serves a certificate for %s, a name neither configured nor registered", n.id, unknown)
			}
		}
	}
	probeUnknown()
	// An order the probe caused would come from a pass of the leader's
	// order loop, which reads the names to order as it begins and orders
	// them one after the other. A domain registered after the probe is
	// obtained in a pass that began after it; a second, registered once
	// the first is obtained, in a later pass. So once the second is
	// obtained, a pass that began after the probe has ended, and any order
	// for the unknown name is placed and logged.
	for _, name := range []string{"one.linkraft.test", "two.linkraft.test"} {
		ca.resolve(t, name, ips...)
		// 503 while the restarted node's build is not known yet.
		var r response
		if !eventually(30*time.Second, func() bool {
			r = nodes[3].postJSON(t, "/admin/domains", map[string]any{"domain": name})
			return r.status != http.StatusServiceUnavailable
		}) || (r.status != http.StatusOK && r.status != http.StatusCreated) {
			t.Fatalf("register %s: %v", name, r)
		}
		if !eventually(90*time.Second, func() bool {
			for _, n := range nodes {
				if acmeLogs(n.out.String(), "certificate obtained", name) > 0 {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("no node obtained a certificate for %s, registered after the probe, within 90 s", name)
		}
	}
	probeUnknown()
	for _, n := range nodes {
		if strings.Contains(n.out.String(), unknown) {
			t.Fatalf("%s mentions a name no one asked for:\n%s", n.id, tail(n.out.String(), 2000))
		}
	}
}

// acmeLogs counts the lines of a node's log (slog's text format) with
// the message msg and the attribute name=name.
func acmeLogs(out, msg, name string) int {
	count := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, ` msg="`+msg+`" `) && slices.Contains(strings.Fields(line), "name="+name) {
			count++
		}
	}
	return count
}

// onlyTLSALPN serves the CA's ACME API on a listener of its own, on which
// every authorization offers tls-alpn-01 alone, and returns its directory
// URL: pebble offers every challenge type. pebble writes its URLs, and
// checks those a request signs, with the Host the request names, which
// the proxy keeps: the client only ever sees the proxy's.
func (ca *acmeCA) onlyTLSALPN(t *testing.T) string {
	t.Helper()
	pebble, err := url.Parse(ca.directory)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "https", Host: pebble.Host})
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.listenerCAs}}
	proxy.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var authz map[string]any
		if json.Unmarshal(body, &authz) == nil && authz["identifier"] != nil && authz["challenges"] != nil {
			var kept []any
			for _, c := range authz["challenges"].([]any) {
				if c.(map[string]any)["type"] == "tls-alpn-01" {
					kept = append(kept, c)
				}
			}
			authz["challenges"] = kept
			body, _ = json.Marshal(authz)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	cert, err := tls.LoadX509KeyPair(ca.listenerCert, ca.listenerKey)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String() + pebble.Path
}

// TestHTTPSWithTLSALPN: a CA that offers tls-alpn-01 alone, and cannot
// reach the nodes' plain HTTP, validates a name through whichever node
// it reaches with ALPN acme-tls/1: the leader put the challenge in the
// replicated state, and each node answers with the certificate it makes
// from it. Every node then serves the certificate issued.
func TestHTTPSWithTLSALPN(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	httpPort, httpsPort := portOnAll(t, ips...), portOnAll(t, ips...)
	// pebble would look for HTTP-01 on a port where nothing listens.
	ca := startACMECA(t, freePort(t, false), httpsPort)
	directory := ca.onlyTLSALPN(t)
	const name = "alpn.linkraft.test"
	ca.resolve(t, name, ips...)

	nodes, gossip := nodesOnAddresses(t, ips, httpPort)
	for i, n := range nodes {
		n.args, n.env = n.commandLine(nodeOptions{Settings: map[string]string{
			"join": strings.Join(gossip, ","), "bootstrap-expect": "3",
			"https-addr": net.JoinHostPort(ips[i], itoa(httpsPort)), "acme-domains": name, "acme-email": "ops@linkraft.test",
			"acme-directory": directory, "acme-ca-root": ca.caRoot, "http-redirect": "false"}})
		n.launch()
	}
	var first *x509.Certificate
	for i, n := range nodes {
		addr := net.JoinHostPort(ips[i], itoa(httpsPort))
		var cert *x509.Certificate
		var err error
		if !eventually(90*time.Second, func() bool { cert, err = servedCertificate(addr, name, ca.roots); return err == nil }) {
			t.Fatalf("%s does not serve a certificate for %s within 90 s: %v\n%s", n.id, name, err, tail(n.out.String(), 3000))
		}
		if first == nil {
			first = cert
		} else if !cert.Equal(first) {
			t.Fatalf("%s serves another certificate for %s than node1", n.id, name)
		}
	}
	// The challenge is gone from the state once validated: a validation
	// handshake now gets no certificate.
	if !eventually(10*time.Second, func() bool {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(ips[0], itoa(httpsPort)),
			&tls.Config{ServerName: name, NextProtos: []string{"acme-tls/1"}, InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
		}
		return err != nil
	}) {
		t.Fatal("a validation handshake is still answered after the certificate was issued")
	}
}

// nodesOnAddresses makes (does not start) a node on each address, with
// one cluster key, every node's plain HTTP on the same port (so that the
// CA's HTTP-01 validation reaches any of them by name), and returns
// them with their gossip addresses.
func nodesOnAddresses(t *testing.T, ips []string, httpPort int) ([]*node, []string) {
	t.Helper()
	key := newClusterKey(t)
	nodes := make([]*node, len(ips))
	var gossip []string
	for i, ip := range ips {
		n := newNode(t, "node"+itoa(i+1))
		n.clusterKey = key
		n.httpAddr = net.JoinHostPort(ip, itoa(httpPort))
		n.raftAddr = net.JoinHostPort(ip, itoa(freePortOn(t, ip, false)))
		n.gossipAddr = net.JoinHostPort(ip, itoa(freePortOn(t, ip, true)))
		nodes[i] = n
		gossip = append(gossip, n.gossipAddr)
	}
	return nodes, gossip
}

// handshakeTally counts the outcomes of TLS handshakes against one
// address: refused (nothing listens), completed (a certificate that
// verifies for the name), alert (the server answered the handshake with
// a TLS alert: what a browser does not retry elsewhere) and other
// (reset, timeout, a certificate that does not verify), with the first
// alert's and other's text.
type handshakeTally struct {
	refused, completed, alert, other int
	firstAlert, firstOther           string
	// sinceCompleted is when, from the tally's start, the first handshake
	// completed; -1 when none did.
	sinceCompleted time.Duration
}

func (h handshakeTally) String() string {
	return fmt.Sprintf("refused %d, completed %d (first after %v), alert %d %q, other %d %q",
		h.refused, h.completed, h.sinceCompleted.Round(time.Millisecond), h.alert, h.firstAlert, h.other, h.firstOther)
}

// tallyHandshakes handshakes with addr for name every 20 ms, each on a
// new connection, until window has passed or, with untilCompleted, the
// first handshake completes; at most window/20ms+1 handshakes.
func tallyHandshakes(addr, name string, roots *x509.CertPool, window time.Duration, untilCompleted bool) handshakeTally {
	const every = 20 * time.Millisecond
	tally := handshakeTally{sinceCompleted: -1}
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; i <= int(window/every); i++ {
		if i > 0 {
			<-tick.C
		}
		if time.Since(start) > window {
			break
		}
		_, err := servedCertificate(addr, name, roots)
		var op *net.OpError
		switch {
		case err == nil:
			if tally.completed == 0 {
				tally.sinceCompleted = time.Since(start)
			}
			tally.completed++
		case errors.Is(err, syscall.ECONNREFUSED):
			tally.refused++
		case errors.As(err, &op) && op.Op == "remote error":
			if tally.alert == 0 {
				tally.firstAlert = fmt.Sprintf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			}
			tally.alert++
		default:
			if tally.other == 0 {
				tally.firstOther = fmt.Sprintf("%v after %v", err, time.Since(start).Round(time.Millisecond))
			}
			tally.other++
		}
		if untilCompleted && tally.completed > 0 {
			break
		}
	}
	return tally
}

// TestHTTPSNeverHalfUp: a node's HTTPS port refuses connections (nothing
// listens) until it can complete the handshake for its names, then
// completes it; a client never gets a TLS alert from it. A brand-new
// cluster keeps it closed until its first certificate is obtained; a
// restarted node, killed or stopped, serves the certificate it held
// before it caught up with the cluster — the certificate was stored
// after the last snapshot (there is none), so its state has it only once
// the leader tells it the log is committed.
func TestHTTPSNeverHalfUp(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	httpPort, httpsPort := portOnAll(t, ips...), portOnAll(t, ips...)
	ca := startACMECA(t, httpPort, freePort(t, false))
	const name = "up.linkraft.test"
	ca.resolve(t, name, ips...)
	nodes, gossip := nodesOnAddresses(t, ips, httpPort)
	for i, n := range nodes {
		n.args, n.env = n.commandLine(nodeOptions{Settings: map[string]string{
			"join": strings.Join(gossip, ","), "bootstrap-expect": "3",
			"https-addr": net.JoinHostPort(ips[i], itoa(httpsPort)), "acme-domains": name, "acme-email": "ops@linkraft.test",
			"acme-directory": ca.directory, "acme-ca-root": ca.caRoot, "http-redirect": "false"}})
		n.launch()
	}
	httpsAddr := func(i int) string { return net.JoinHostPort(ips[i], itoa(httpsPort)) }

	// A brand-new cluster: closed until the first order completes.
	fresh := tallyHandshakes(httpsAddr(0), name, ca.roots, 90*time.Second, true)
	t.Logf("%s, brand-new cluster, until the first certificate: %v", nodes[0].id, fresh)
	if fresh.completed == 0 {
		t.Fatalf("%s does not serve a certificate for %s within 90 s: %v\n%s", nodes[0].id, name, fresh, tail(nodes[0].out.String(), 3000))
	}
	if fresh.alert > 0 {
		t.Errorf("%s answered handshakes with TLS alerts before its first certificate: %v", nodes[0].id, fresh)
	}
	for i, n := range nodes {
		if !eventually(30*time.Second, func() bool { _, err := servedCertificate(httpsAddr(i), name, ca.roots); return err == nil }) {
			t.Fatalf("%s does not serve %s", n.id, name)
		}
	}

	restarts := []struct {
		how  string
		down func(*node)
	}{
		{"kill -9", (*node).kill9},
		{"SIGTERM", func(n *node) { _ = n.stop() }},
	}
	for _, r := range restarts {
		// The leader: its restart takes an election as well as a catch-up.
		leader, _ := waitOneLeader(t, leaderWaitTimeout, nodes...)
		i := slices.Index(nodes, leader)
		// What it serves is kept in its data dir once its log says so.
		if !eventually(30*time.Second, func() bool {
			for _, line := range strings.Split(leader.out.String(), "\n") {
				if strings.Contains(line, ` msg="kept the certificates served here for the next start" `) && slices.Contains(strings.Fields(line), "certificates=1") {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("%s did not keep the certificate it serves for its next start\n%s", leader.id, tail(leader.out.String(), 3000))
		}
		r.down(leader)
		fmt.Fprintf(leader.out, "\n=== harness: restart ===\n")
		leader.launch()
		got := tallyHandshakes(httpsAddr(i), name, ca.roots, 15*time.Second, false)
		t.Logf("%s, the leader, restarted after %s: %v", leader.id, r.how, got)
		out := leader.out.String()
		for _, line := range strings.Split(out[strings.LastIndex(out, "=== harness: restart ==="):], "\n") {
			if strings.Contains(line, "HTTPS") || strings.Contains(line, "component=tls") {
				t.Logf("%s: %s", leader.id, line)
			}
		}
		if got.alert > 0 {
			t.Errorf("%s, restarted after %s, answered handshakes with TLS alerts: %v", leader.id, r.how, got)
		}
		if err := leader.waitReady(leaderKnown); err != nil {
			t.Fatalf("%s after restart: %v", leader.id, err)
		}
		if !eventually(30*time.Second, func() bool { _, err := servedCertificate(httpsAddr(i), name, ca.roots); return err == nil }) {
			t.Fatalf("%s, restarted after %s, does not serve %s", leader.id, r.how, name)
		}
	}
}
