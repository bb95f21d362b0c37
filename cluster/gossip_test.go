package cluster

import "testing"

// TestAdvertiseIP: memberlist takes only an IP, so a host name given as
// --advertise (a container's service name) is resolved first.
func TestAdvertiseIP(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"10.0.0.7":    "10.0.0.7",
		"[fd00::1]":   "fd00::1",
		"fd00::1":     "fd00::1",
		"localhost":   "127.0.0.1",
		"127.0.0.1":   "127.0.0.1",
		"192.168.1.1": "192.168.1.1",
	} {
		got, err := advertiseIP(in)
		if err != nil || got != want {
			t.Errorf("advertiseIP(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := advertiseIP("no-such-host.invalid"); err == nil {
		t.Errorf("advertiseIP of an unresolvable name = %q, want an error", got)
	}
}
