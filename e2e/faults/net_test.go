package faults

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// netEnv is where the nodes live: one network namespace per node on a
// bridge the test creates (isolated mode), or 127.0.0.x addresses in the
// root namespace (loopback mode, no partitions).
type netEnv struct {
	isolated bool
	bridge   string      // lrfXXXX, isolated mode only
	subnet   int         // k of 198.18.k.0/24, isolated mode only
	ips      []string    // node i's address
	ns       []string    // node i's namespace, isolated mode only
	made     [][2]string // namespaces created and their veth's host end, removed in cleanup
}

// cmdTimeout bounds every ip / iptables call.
const cmdTimeout = 15 * time.Second

// run runs a command (bounded) and wraps its output into the error.
func run(name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// canIsolate reports whether namespaces can be used, and why not.
func canIsolate() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "not root"
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, tool + " not found"
		}
	}
	return true, ""
}

// newNetEnv prepares addresses for n nodes, in namespaces when possible.
// Everything it creates is removed in t.Cleanup, even on failure.
func newNetEnv(t *testing.T, n int, rng *mrand.Rand) *netEnv {
	t.Helper()
	if ok, why := canIsolate(); !ok {
		t.Logf("network: %s: nodes on 127.0.0.x in the root namespace; partition nemeses are skipped", why)
		return loopbackEnv(n)
	}
	env, err := isolatedEnv(t, n, rng)
	if err != nil {
		// Root without the right to make namespaces (a container, say):
		// what was made is removed by its cleanups.
		t.Logf("network: namespaces: %v: nodes on 127.0.0.x in the root namespace; partition nemeses are skipped", err)
		return loopbackEnv(n)
	}
	return env
}

func loopbackEnv(n int) *netEnv {
	env := &netEnv{}
	for i := 1; i <= n; i++ {
		env.ips = append(env.ips, fmt.Sprintf("127.0.0.%d", 10+i))
	}
	return env
}

// isolatedEnv creates the bridge, the namespaces and the veth pairs.
func isolatedEnv(t *testing.T, n int, rng *mrand.Rand) (*netEnv, error) {
	k, err := freeSubnet(rng)
	if err != nil {
		return nil, err
	}
	env := &netEnv{isolated: true, subnet: k, bridge: fmt.Sprintf("lrf%04x", rng.IntN(1<<16))}
	if err := env.addBridge(t, k); err != nil {
		return nil, err
	}
	// One cleanup for every namespace, registered before the cluster's
	// (which kills the nodes), so it runs after it: nodes added during the
	// run live in namespaces made after that registration.
	t.Cleanup(env.removeNamespaces(t))
	for i := 1; i <= n; i++ {
		if err := env.addNode(k, i); err != nil {
			return nil, err
		}
	}
	t.Logf("network: bridge %s 198.18.%d.1/24, namespaces %v, nodes %v", env.bridge, k, env.ns, env.ips)
	return env, nil
}

// freeSubnet picks k such that no local address is in 198.18.k.0/24.
func freeSubnet(rng *mrand.Rand) (int, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return 0, fmt.Errorf("list addresses: %w", err)
	}
	for range 50 {
		k := 1 + rng.IntN(254)
		_, subnet, _ := net.ParseCIDR(fmt.Sprintf("198.18.%d.0/24", k))
		used := false
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && subnet.Contains(ipn.IP) {
				used = true
			}
		}
		if !used {
			return k, nil
		}
	}
	return 0, fmt.Errorf("no free 198.18.k.0/24 in 50 tries")
}

// addBridge creates the bridge and lets bridged traffic through the root
// namespace's FORWARD chain (br_netfilter may send it there, and a DROP
// policy would cut the nodes off); both are undone in cleanup.
func (e *netEnv) addBridge(t *testing.T, k int) error {
	if err := run("ip", "link", "add", e.bridge, "type", "bridge"); err != nil {
		return err
	}
	t.Cleanup(func() { logErr(t, run("ip", "link", "del", e.bridge)) })
	rule := []string{"FORWARD", "-i", e.bridge, "-o", e.bridge, "-j", "ACCEPT"}
	if err := run("iptables", append([]string{"-w", "-I"}, rule...)...); err != nil {
		return err
	}
	t.Cleanup(func() { logErr(t, run("iptables", append([]string{"-w", "-D"}, rule...)...)) })
	if err := run("ip", "addr", "add", fmt.Sprintf("198.18.%d.1/24", k), "dev", e.bridge); err != nil {
		return err
	}
	return run("ip", "link", "set", e.bridge, "up")
}

// addNode creates node i's namespace and its veth pair into the bridge
// (removed by removeNamespaces).
func (e *netEnv) addNode(k, i int) error {
	ns := fmt.Sprintf("%s-n%d", e.bridge, i)
	host, peer := fmt.Sprintf("%sh%d", e.bridge, i), fmt.Sprintf("%sp%d", e.bridge, i)
	ip := fmt.Sprintf("198.18.%d.%d", k, 10+i)
	if err := run("ip", "netns", "add", ns); err != nil {
		return err
	}
	e.made = append(e.made, [2]string{ns, host})
	steps := [][]string{
		{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
		{"ip", "link", "set", peer, "netns", ns},
		{"ip", "link", "set", host, "master", e.bridge},
		{"ip", "link", "set", host, "up"},
		{"ip", "netns", "exec", ns, "ip", "addr", "add", ip + "/24", "dev", peer},
		{"ip", "netns", "exec", ns, "ip", "link", "set", peer, "up"},
		{"ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	e.ns = append(e.ns, ns)
	e.ips = append(e.ips, ip)
	return nil
}

// removeNamespaces returns the cleanup that deletes every namespace made.
// Deleting a namespace deletes the veth end inside it, and with it the
// pair; the host end is deleted too in case the move failed.
func (e *netEnv) removeNamespaces(t *testing.T) func() {
	return func() {
		for _, m := range e.made {
			logErr(t, run("ip", "netns", "del", m[0]))
			_ = run("ip", "link", "del", m[1])
		}
	}
}

// grow adds the network of the next node, slot len(e.ips): a namespace on
// the bridge, or the next 127.0.0.x.
func (e *netEnv) grow() error {
	i := len(e.ips) + 1
	if !e.isolated {
		e.ips = append(e.ips, fmt.Sprintf("127.0.0.%d", 10+i))
		return nil
	}
	return e.addNode(e.subnet, i)
}

// partition makes node i drop every packet from and to the nodes in
// cut[i] (iptables inside node i's namespace).
func (e *netEnv) partition(cut map[int][]int) error {
	for i, peers := range cut {
		for _, j := range peers {
			if err := e.iptables(i, "-A", "INPUT", "-s", e.ips[j], "-j", "DROP"); err != nil {
				return err
			}
			if err := e.iptables(i, "-A", "OUTPUT", "-d", e.ips[j], "-j", "DROP"); err != nil {
				return err
			}
		}
	}
	return nil
}

// heal flushes INPUT and OUTPUT in every namespace.
func (e *netEnv) heal() error {
	var errs []string
	for i := range e.ns {
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			if err := e.iptables(i, "-F", chain); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("heal: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (e *netEnv) iptables(i int, args ...string) error {
	return run("ip", append([]string{"netns", "exec", e.ns[i], "iptables", "-w"}, args...)...)
}

// command returns the argv that runs bin with args as node i.
func (e *netEnv) command(i int, bin string, args ...string) []string {
	if !e.isolated {
		return append([]string{bin}, args...)
	}
	return append([]string{"ip", "netns", "exec", e.ns[i], bin}, args...)
}

func logErr(t *testing.T, err error) {
	if err != nil {
		t.Errorf("cleanup: %v", err)
	}
}
