package e2e

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
)

// TestCompatBitly drives linkraft with Bitly's npm client (bitly 7.1.2),
// unchanged, against three nodes serving HTTPS (--tls-cert, --tls-key)
// with a certificate of a CA made here, which Node trusts through
// NODE_EXTRA_CA_CERTS: writes through one node, reads through another, the
// links it made checked through linkraft's own API on the third.
func TestCompatBitly(t *testing.T) {
	skipIfShort(t)
	nodeBin := nodeJS(t, "bitly")
	// The nodes serve HTTPS on port 443 of loopback addresses of their
	// own: Bitly's npm client takes a host name for its API and always
	// calls https://<host>/v4/ on port 443. The cluster's short URLs have
	// one name, as in production: the first node's (without --base-url
	// they would name the plain HTTP address).
	const shortHost = "127.0.0.41"
	bitlyIPs := []string{shortHost, "127.0.0.42", "127.0.0.43"}
	for _, ip := range bitlyIPs {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "443"))
		if err != nil {
			fix := "another process holds the port: stop it"
			if errors.Is(err, syscall.EACCES) {
				fix = "binding port 443 needs root, as CI runs the tests"
			}
			realPartMissing(t, "Bitly's client only calls port 443: "+err.Error(), fix)
		}
		l.Close()
	}
	certFile, keyFile, caFile := writeListenerCert(t, t.TempDir(), bitlyIPs...)

	key := newClusterKey(t)
	nodes := make([]*node, len(bitlyIPs))
	var gossip []string
	for i := range nodes {
		nodes[i] = newNode(t, "node"+itoa(i+1))
		nodes[i].clusterKey = key
		gossip = append(gossip, nodes[i].gossipAddr)
	}
	for i, n := range nodes {
		// Plain HTTP stays as it is (no redirect to https): the harness
		// and the checks below use it.
		n.args, n.env = n.commandLine(nodeOptions{Settings: map[string]string{
			"join": strings.Join(gossip, ","), "bootstrap-expect": itoa(len(nodes)),
			"https-addr": net.JoinHostPort(bitlyIPs[i], "443"), "tls-cert": certFile, "tls-key": keyFile,
			"http-redirect": "false", "base-url": "https://" + shortHost,
		}})
		n.launch()
	}
	for _, n := range nodes {
		if err := n.waitReady(leaderKnown); err != nil {
			t.Fatalf("%s: %v", n.id, err)
		}
	}
	k := createKey(t, nodes[0], `{"name":"bitly","scopes":["links:read","links:write","stats:read"],"workspaces":["team"]}`)
	res := runClient(t, nodeBin, "bitly.mjs", map[string]string{
		"WRITE_HOST": bitlyIPs[0], "READ_HOST": bitlyIPs[1], "SHORT_HOST": shortHost, "API_KEY": k.Key, "NODE_EXTRA_CA_CERTS": caFile,
	})
	for name, target := range map[string]string{"kept": "https://example.com/bitly-kept", "renamed": "https://example.com/bitly-made"} {
		code, _ := res[name].(string)
		requireNativeLink(t, nodes[2], k.Key, code, target)
	}
	// The title the client set through the update, as linkraft keeps it.
	r := nodes[2].request(t, "GET", "/api/v1/urls/"+res["renamed"].(string), bearer(k.Key), nil)
	if !strings.Contains(string(r.body), `"title":"Renamed"`) {
		t.Fatalf("the updated link through linkraft's API: %v", r)
	}
}
