package httpd

import (
	"net/netip"
	"strconv"
	"testing"
	"time"
)

// TestDefaultHashLimitsBoundEachClientAndKey: with the budgets a node
// starts with, whatever its core count, one client address (an IPv6 /64
// included) gets its own burst of password hashes and no more, and another
// address still gets its burst after it; one API key spread over many
// addresses gets the key's burst and no more, and another key goes on.
// The node's budget grows with its cores, so on a large node it is the
// per-client and per-key budgets alone that keep one client from taking
// every hash the node has.
func TestDefaultHashLimitsBoundEachClientAndKey(t *testing.T) {
	for _, tc := range []struct {
		cores int
		// What each step is granted when it asks for far more than any
		// burst: a client, another client after it, a key over many
		// addresses, another key after it.
		client, otherClient, key, otherKey int
	}{
		// Two cores: the node's burst of 20 is the client's two bursts, or
		// the key's one; nothing is left for another key after it. The
		// other key asks from one address, which its client's burst bounds.
		{cores: 2, client: 10, otherClient: 10, key: 20, otherKey: 0},
		{cores: 16, client: 10, otherClient: 10, key: 20, otherKey: 10},
		{cores: 64, client: 10, otherClient: 10, key: 20, otherKey: 10},
	} {
		t.Run(strconv.Itoa(tc.cores)+" cores", func(t *testing.T) {
			// A fresh budget for each half, so that one half's hashes are
			// not what the node lacks in the other.
			budgetAt := func(t *testing.T) *hashBudget {
				h := newHashBudget(defaultHashLimits(tc.cores))
				t.Cleanup(h.stop)
				frozen := time.Now() // nothing refills while the test runs
				h.now = func() time.Time { return frozen }
				return h
			}
			const asked = 10_000

			h := budgetAt(t)
			client := netip.MustParseAddr("2001:db8:1:2::10")
			if got, _ := h.admit(client, "", asked); got != tc.client {
				t.Fatalf("one client asking for %d hashes was granted %d, want %d", asked, got, tc.client)
			}
			// The rest of its /64 is the same client: asking one hash at a
			// time from addresses it picks freely gets it nothing more.
			for i := range 20 {
				same := netip.MustParseAddr("2001:db8:1:2::" + strconv.FormatInt(int64(0x100+i), 16))
				if got, short := h.admit(same, "", 1); got != 0 || short == nil || short.whose != "for this address" {
					t.Fatalf("hash %d more from %s, in the spent client's /64: granted %d (%+v), want 0, refused for this address", i+1, same, got, short)
				}
			}
			other := netip.MustParseAddr("2001:db8:1:3::10")
			if got, _ := h.admit(other, "", asked); got != tc.otherClient {
				t.Fatalf("another client after the first was granted %d, want %d", got, tc.otherClient)
			}

			h = budgetAt(t)
			keyGranted := 0
			for i := range 100 { // far more addresses than the key's burst
				addr := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
				got, short := h.admit(addr, "key-a", 1)
				if got == 0 && (short == nil || (short.whose != "for this API key" && short.whose != "on this node")) {
					t.Fatalf("the key's hash %d from its own address was refused for %+v, want the key's or the node's budget", i+1, short)
				}
				keyGranted += got
			}
			if keyGranted != tc.key {
				t.Fatalf("one key asking once from each of 100 addresses was granted %d hashes, want %d", keyGranted, tc.key)
			}
			if got, _ := h.admit(netip.MustParseAddr("198.51.100.1"), "key-b", asked); got != tc.otherKey {
				t.Fatalf("another key after the first was granted %d, want %d", got, tc.otherKey)
			}
		})
	}
}
