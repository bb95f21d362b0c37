package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDeployDocHTTPS is the operator's day of DEPLOY.md's "Serving on
// 80/443: HTTPS with nothing but linkraft": the first day's cluster,
// then section 2's drop-in and the section's lines in every environment
// file, a certificate for the public name from a real ACME CA (Debian's
// pebble, as in https_test.go, on 127.0.0.1; its DNS gives the name the
// VMs' addresses), and what the section says the operator then sees. The
// only additions to the doc's lines are the test CA's: its directory and
// the CA of its own HTTPS listener (LINKRAFT_ACME_DIRECTORY and
// LINKRAFT_ACME_CA_ROOT, as the section says for a test CA), and the
// root that signs what it issues for the linkraft commands
// (LINKRAFT_CA_FILE, as it says for a private CA).
//
// Not parallel: the VMs listen on the doc's fixed ports of the day's
// loopback block.
func TestDeployDocHTTPS(t *testing.T) {
	skipIfShort(t)
	d := newDeployDoc(t)
	for _, m := range d.first3() {
		for _, port := range []string{"80", "443"} {
			if c, err := net.DialTimeout("tcp", net.JoinHostPort(m.ip, port), time.Second); err == nil {
				c.Close()
				t.Fatalf("%s:%s is in use: the simulated VMs serve HTTPS on the doc's ports of this loopback block", m.ip, port)
			}
		}
	}
	// The CA validates HTTP-01 on port 80 and TLS-ALPN-01 on 443 of the
	// address its DNS gives; started here, for the whole day.
	h := &deployDocHTTPS{deployDoc: d, ca: startACMECA(t, 80, 443)}
	d.runDay(t, append(d.firstDay(),
		docStep{"serve on 80/443 with a certificate from the CA", h.switchOver},
		docStep{"one certificate on every node, plain HTTP sends to https", h.serving},
		docStep{"linkraft status over HTTPS", h.status},
	))
}

// deployDocHTTPS is the HTTPS day's state.
type deployDocHTTPS struct {
	*deployDoc
	ca     *acmeCA
	rootCA []byte // PEM: the root that signs the CA's certificates
}

// Where the test CA's files lie on each machine (the doc's paths: the
// table maps them onto the simulated machine).
const (
	docACMECARoot = "/etc/linkraft-acme-ca.pem" // LINKRAFT_ACME_CA_ROOT
	docCAFile     = "/etc/linkraft-ca.pem"      // LINKRAFT_CA_FILE
)

// switchOver follows the section: the name points at every VM, then on
// each, one at a time, the drop-in, the environment file's lines and a
// restart.
func (h *deployDocHTTPS) switchOver(t *testing.T) {
	var ips []string
	for _, m := range h.first3() {
		ips = append(ips, m.ip)
	}
	// Round-robin DNS. This pebble validates at the first address only:
	// lr1's, which is restarted first, so that any order placed (by a
	// leader with the new settings) finds its challenge there.
	h.ca.resolve(t, deployDocHost, ips...)
	for _, m := range h.first3() {
		// systemctl edit linkraft writes the doc's lines as a drop-in.
		writeSimFile(t, m.path("etc/systemd/system/linkraft.service.d/override.conf"), h.render(t, m, "bind-low-ports", nil, nil), 0o644)
		copySimFile(t, h.ca.caRoot, h.onMachine(m, docACMECARoot), 0o644)
		lines := h.render(t, m, "https-env", nil, nil) +
			"LINKRAFT_ACME_DIRECTORY=" + h.ca.directory + "\n" +
			"LINKRAFT_ACME_CA_ROOT=" + h.onMachine(m, docACMECARoot) + "\n"
		f, err := os.OpenFile(m.path("etc/linkraft.env"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString(lines)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		h.exec(t, m, "restart", "", "systemctl restart linkraft\n", 2*time.Minute)
		// Back, with a leader, before the next goes down (/health stays
		// on plain HTTP).
		var got health
		if !eventually(30*time.Second, func() bool {
			got, err = h.get("http://" + m.ip + "/health")
			return err == nil && got.Leader != ""
		}) {
			t.Fatalf("after systemctl restart linkraft, %s's http://%s/health: %+v, %v; want 200 with a leader", m.name, m.ip, got, err)
		}
	}
}

// serving checks the section's promises: one certificate for the name
// on every node's 443, and plain HTTP that sends to https (the health
// checks it keeps answering are switchOver's).
func (h *deployDocHTTPS) serving(t *testing.T) {
	var first *x509.Certificate
	for i, m := range h.first3() {
		var state tls.ConnectionState
		var err error
		// The first order: an account, an order, a validation, then the
		// certificate in the state of every node.
		within := 10 * time.Second
		if i == 0 {
			within = 90 * time.Second
		}
		if !eventually(within, func() bool {
			conn, derr := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", m.ip+":443",
				&tls.Config{ServerName: deployDocHost, RootCAs: h.ca.roots})
			if err = derr; err != nil {
				return false
			}
			state = conn.ConnectionState()
			conn.Close()
			return true
		}) {
			var acme []string
			for _, m := range h.first3() {
				acme = append(acme, linesAbout(m.journal("linkraft"), "certificate", 5))
			}
			t.Fatalf("%s:443 serves no certificate for %s from the CA within %v: %v; the nodes' log lines about certificates:\n%s",
				m.name, deployDocHost, within, err, strings.Join(acme, "\n"))
		}
		switch {
		case first == nil:
			first = state.PeerCertificates[0]
			chain := state.VerifiedChains[0]
			h.rootCA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: chain[len(chain)-1].Raw})
		case !state.PeerCertificates[0].Equal(first):
			t.Errorf("%s serves another certificate for %s than lr1: every node should serve the one the cluster holds", m.name, deployDocHost)
		}

		want := "https://" + deployDocHost + "/hello?x=1"
		resp, err := h.client.Get("http://" + m.ip + "/hello?x=1")
		if err != nil {
			t.Fatalf("plain HTTP on %s: %v", m.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
			t.Errorf("plain HTTP on %s: %d to %q, want 308 to %s", m.name, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}

// status runs the section's linkraft status on a VM, and the same from
// the workstation at a VM's address; and, on a VM, the plain HTTP address
// the section says fails.
func (h *deployDocHTTPS) status(t *testing.T) {
	// The workstation's copy of the environment file, as in section 9.
	copySimFile(t, h.vm("lr1").path("etc/linkraft.env"), h.ws.path("etc/linkraft.env"), 0o600)
	lr2 := h.vm("lr2")
	// The admin token as in section 4, and the test CA's root.
	pre := map[*simHost]string{}
	for _, m := range []*simHost{lr2, h.ws} {
		writeSimFile(t, h.onMachine(m, docCAFile), string(h.rootCA), 0o644)
		pre[m] = h.render(t, m, "first-status", nil, nil, "before", "linkraft status") +
			h.onMachine(m, "export LINKRAFT_CA_FILE="+docCAFile+"\n")
	}
	recipe := h.render(t, lr2, "https-status", nil, nil)
	// From the workstation: the recipe with lr1's address for 127.0.0.1.
	fromWS := h.onMachine(h.ws, strings.ReplaceAll(h.recipes["https-status"].text, "127.0.0.1", "192.0.2.11"))
	for _, tc := range []struct {
		on        *simHost
		label     string
		cmd       string
		wantVoted bool // the three voters, else a failure naming the redirect
	}{
		{lr2, "https-status", recipe, true},
		{h.ws, "https-status", fromWS, true},
		{lr2, "status-plain-http", h.onMachine(lr2, "linkraft status --addr 127.0.0.1:80\n"), false},
	} {
		var out, why string
		var err error
		// The operator looks again while the node restarted last is
		// not yet reachable from the leader.
		rerunUntil(20*time.Second, func() bool {
			out, err = h.try(t, tc.on, tc.label, pre[tc.on], tc.cmd, time.Minute)
			why = votersMismatch(out, firstIDs)
			return !tc.wantVoted || err == nil && why == ""
		})
		switch {
		case tc.wantVoted && (err != nil || why != ""):
			t.Errorf("%s on %s: %v, %s; want lr1-lr3 as voters, one leading:\n%s", strings.TrimSpace(tc.cmd), tc.on.name, err, why, out)
		case !tc.wantVoted && (err == nil || !strings.Contains(out, "308") || !strings.Contains(out, "not followed")):
			t.Errorf("%s on %s: %v; want a failure naming the 308 it did not follow:\n%s", strings.TrimSpace(tc.cmd), tc.on.name, err, out)
		}
	}
}

// onMachine maps the doc's addresses, name and paths in text, a command
// or path of the section's prose rather than of a marked block, as the
// table maps a recipe for m.
func (d *deployDoc) onMachine(m *simHost, text string) string {
	text = docSubst(text, d.vms)
	for _, r := range m.rules {
		text = r.apply(text)
	}
	return text
}
