package secure

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// waitLimit bounds every wait in these tests.
const waitLimit = 5 * time.Second

// loopback is 127.0.0.1, built fresh so tests share no mutable net.IP.
func loopback() net.IP { return net.IPv4(127, 0, 0, 1) }

func newLayer(t *testing.T, key *Key) *StreamLayer {
	t.Helper()
	s, err := NewStreamLayer("127.0.0.1:0", &net.TCPAddr{IP: loopback()}, key)
	if err != nil {
		t.Fatalf("NewStreamLayer: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// serverResult is what the accepting side saw on one connection.
type serverResult struct {
	got []byte
	err error
}

// serve accepts one connection, reads n bytes and, if that worked, writes
// reply. It reports what it read. The connection gets a deadline so a test
// failure cannot hang the goroutine.
func serve(s *StreamLayer, n int, reply []byte) <-chan serverResult {
	out := make(chan serverResult, 1)
	go func() {
		conn, err := s.Accept()
		if err != nil {
			out <- serverResult{err: err}
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(waitLimit))
		buf := make([]byte, n)
		m, err := io.ReadFull(conn, buf)
		if err == nil && reply != nil {
			_, err = conn.Write(reply)
		}
		out <- serverResult{got: buf[:m], err: err}
	}()
	return out
}

func wait(t *testing.T, ch <-chan serverResult) serverResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(2 * waitLimit):
		t.Fatal("server side did not finish in time")
		return serverResult{}
	}
}

func TestNewStreamLayerAdvertise(t *testing.T) {
	key, _ := newTestKey(t)
	tests := []struct {
		name      string
		bind      string
		advertise net.Addr
		wantErr   string
	}{
		{"nil", "127.0.0.1:0", nil, "set --advertise"},
		{"ipv4 unspecified", "127.0.0.1:0", &net.TCPAddr{IP: net.IPv4zero, Port: 7000}, "set --advertise"},
		{"ipv6 unspecified", "127.0.0.1:0", &net.TCPAddr{IP: net.IPv6unspecified, Port: 7000}, "set --advertise"},
		{"no ip", "127.0.0.1:0", &net.TCPAddr{Port: 7000}, "set --advertise"},
		{"not tcp", "127.0.0.1:0", &net.UDPAddr{IP: loopback(), Port: 7000}, "not a TCP address"},
		{"bad bind", "127.0.0.1:notaport", &net.TCPAddr{IP: loopback(), Port: 7000}, "listen on"},
		{"fixed port kept", "127.0.0.1:0", &net.TCPAddr{IP: loopback(), Port: 7000}, ""},
		{"port 0 takes bound port", "127.0.0.1:0", &net.TCPAddr{IP: loopback()}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewStreamLayer(tt.bind, tt.advertise, key)
			if tt.wantErr != "" {
				if err == nil {
					s.Close()
					t.Fatalf("NewStreamLayer succeeded; want error containing %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %q does not contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewStreamLayer: %v", err)
			}
			defer s.Close()
			adv := s.Addr().(*net.TCPAddr)
			want := tt.advertise.(*net.TCPAddr).Port
			if want == 0 {
				want = s.listener.Addr().(*net.TCPAddr).Port
			}
			if !adv.IP.Equal(loopback()) || adv.Port != want || want == 0 {
				t.Fatalf("Addr() = %v, want 127.0.0.1:%d", adv, want)
			}
		})
	}
}

// TestNoKeyNoListener: there is no plain-TCP mode, loopback included.
func TestNoKeyNoListener(t *testing.T) {
	s, err := NewStreamLayer("127.0.0.1:0", &net.TCPAddr{IP: loopback()}, nil)
	if err == nil {
		s.Close()
		t.Fatal("NewStreamLayer listened without a key")
	}
}

// TestExchange: two layers with the same key exchange bytes both ways,
// over TLS.
func TestExchange(t *testing.T) {
	key, _ := newTestKey(t)
	a, b := newLayer(t, key), newLayer(t, key)
	res := serve(b, 4, []byte("pong"))
	conn, err := a.Dial(raft.ServerAddress(b.Addr().String()), waitLimit)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(waitLimit))
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatalf("client write: %v", err)
	}
	reply := make([]byte, 4)
	if _, err := io.ReadFull(conn, reply); err != nil {
		t.Fatalf("client read: %v", err)
	}
	if string(reply) != "pong" {
		t.Fatalf("client got %q", reply)
	}
	r := wait(t, res)
	if r.err != nil || string(r.got) != "ping" {
		t.Fatalf("server got %q, %v", r.got, r.err)
	}
	if _, isTLS := conn.(*tls.Conn); !isTLS {
		t.Fatal("the connection is not TLS")
	}
}

// TestRejectedClients: peers without the cluster key never get a byte to the
// accepting application, however they approach the listener.
func TestRejectedClients(t *testing.T) {
	key, _ := newTestKey(t)
	otherKey, _ := newTestKey(t)
	payload := []byte("AppendEntries please")

	tests := []struct {
		name string
		// dial connects to addr and returns an error if the client itself
		// already noticed the rejection.
		dial func(t *testing.T, addr string) error
		// dialMustFail: the client must see the failure during dial.
		dialMustFail bool
	}{
		{
			name: "stream layer with a different key",
			dial: func(t *testing.T, addr string) error {
				c := newLayer(t, otherKey)
				conn, err := c.Dial(raft.ServerAddress(addr), waitLimit)
				if err != nil {
					return err
				}
				defer conn.Close()
				conn.Write(payload)
				return nil
			},
			dialMustFail: true,
		},
		{
			name: "plain tcp",
			dial: func(t *testing.T, addr string) error {
				conn, err := net.DialTimeout("tcp", addr, waitLimit)
				if err != nil {
					t.Fatalf("tcp dial: %v", err)
				}
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(waitLimit))
				conn.Write(payload)
				// Wait for the server to hang up so the payload was
				// certainly delivered to (and refused by) the listener.
				io.Copy(io.Discard, conn)
				return nil
			},
		},
		{
			name: "tls without a client certificate",
			dial: func(t *testing.T, addr string) error {
				return tlsAttack(t, addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}, payload)
			},
		},
		{
			name: "tls with a foreign certificate, trusting any server",
			dial: func(t *testing.T, addr string) error {
				return tlsAttack(t, addr, &tls.Config{
					InsecureSkipVerify: true,
					MinVersion:         tls.VersionTLS13,
					Certificates:       otherKey.TLSConfig().Certificates,
				}, payload)
			},
		},
		{
			name: "tls 1.2 with a foreign certificate",
			dial: func(t *testing.T, addr string) error {
				return tlsAttack(t, addr, &tls.Config{
					InsecureSkipVerify: true,
					MaxVersion:         tls.VersionTLS12,
					Certificates:       otherKey.TLSConfig().Certificates,
				}, payload)
			},
			dialMustFail: true, // MinVersion 1.3 refuses it in the handshake
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newLayer(t, key)
			res := serve(srv, 4, []byte("pong"))
			dialErr := tt.dial(t, srv.Addr().String())
			if tt.dialMustFail && dialErr == nil {
				t.Fatal("client handshake succeeded; want failure")
			}
			t.Logf("client: %v", dialErr)
			// The attacker's connection never reaches the acceptor: the
			// first it gets is a key holder's.
			exchange(t, newLayer(t, key), srv)
			if r := wait(t, res); r.err != nil || string(r.got) != "ping" {
				t.Fatalf("the acceptor got %q, %v; want the key holder's ping", r.got, r.err)
			}
		})
	}
}

// exchange dials srv from client, sends "ping" and expects "pong".
func exchange(t *testing.T, client, srv *StreamLayer) {
	t.Helper()
	conn, err := client.Dial(raft.ServerAddress(srv.Addr().String()), waitLimit)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(waitLimit))
	conn.Write([]byte("ping"))
	reply := make([]byte, 4)
	if _, err := io.ReadFull(conn, reply); err != nil || string(reply) != "pong" {
		t.Fatalf("client read %q, %v", reply, err)
	}
}

// tlsAttack dials with cfg, writes payload and reads. It returns an error if
// the client saw the rejection during the handshake, and fails the test if
// the server ever answered with application data.
func tlsAttack(t *testing.T, addr string, cfg *tls.Config, payload []byte) error {
	t.Helper()
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: waitLimit}, Config: cfg}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(waitLimit))
	conn.Write(payload)
	got, err := io.ReadAll(conn)
	if len(got) != 0 {
		t.Fatalf("attacker received %q", got)
	}
	if err == nil {
		return errors.New("server closed the connection")
	}
	return nil
}

// TestSilentClientDoesNotBlockAccept: a client that connects and never
// speaks neither blocks Accept for the next peer nor reaches it.
func TestSilentClientDoesNotBlockAccept(t *testing.T) {
	key, _ := newTestKey(t)
	srv := newLayer(t, key)
	silent, err := net.DialTimeout("tcp", srv.Addr().String(), waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	res := serve(srv, 4, []byte("pong"))
	exchange(t, newLayer(t, key), srv)
	if r := wait(t, res); r.err != nil || string(r.got) != "ping" {
		t.Fatalf("the acceptor got %q, %v; want the peer's ping", r.got, r.err)
	}
}

// TestSilentClientIsDropped: a connection that completes no handshake
// within the handshake timeout is closed.
func TestSilentClientIsDropped(t *testing.T) {
	key, _ := newTestKey(t)
	srv, err := newStreamLayer("127.0.0.1:0", &net.TCPAddr{IP: loopback()}, key, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	silent, err := net.DialTimeout("tcp", srv.Addr().String(), waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	silent.SetDeadline(time.Now().Add(waitLimit))
	if n, err := silent.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent client read %d bytes, %v; want the server to hang up", n, err)
	}
}

// TestInternalConnectionsAreSorted: a connection that starts with
// InternalByte goes to Internal() without it, any other to Accept with
// its first byte intact.
func TestInternalConnectionsAreSorted(t *testing.T) {
	key, _ := newTestKey(t)
	srv, client := newLayer(t, key), newLayer(t, key)
	internal := srv.Internal()
	got := make(chan string, 1)
	go func() {
		conn, err := internal.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(waitLimit))
		buf := make([]byte, 3)
		_, err = io.ReadFull(conn, buf)
		got <- fmt.Sprint(string(buf), err)
	}()
	raftRes := serve(srv, 4, []byte("pong"))
	conn, err := client.DialInternal(srv.Addr().String(), waitLimit)
	if err != nil {
		t.Fatalf("DialInternal: %v", err)
	}
	defer conn.Close()
	conn.Write([]byte("GET"))
	exchange(t, client, srv)
	if r := wait(t, raftRes); string(r.got) != "ping" {
		t.Fatalf("raft acceptor got %q, %v", r.got, r.err)
	}
	select {
	case g := <-got:
		if g != "GET<nil>" {
			t.Fatalf("internal acceptor got %q", g)
		}
	case <-time.After(waitLimit):
		t.Fatal("the internal connection never arrived")
	}
	internal.Close()
	if _, err := internal.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}

// TestCapturedInternalRequestIsUseless: with a key, what crosses the
// network between nodes is TLS 1.3: a captured internal request shows
// nothing of the request, and sending the captured bytes again gets no
// answer, because every handshake is fresh.
func TestCapturedInternalRequestIsUseless(t *testing.T) {
	key, _ := newTestKey(t)
	srv, client := newLayer(t, key), newLayer(t, key)
	internal := srv.Internal()
	defer internal.Close()
	answered := make(chan int, 2)
	go func() {
		for range 2 { // the real request, and at most one replay
			conn, err := internal.Accept()
			if err != nil {
				return
			}
			conn.SetDeadline(time.Now().Add(waitLimit))
			buf := make([]byte, 64)
			n, _ := conn.Read(buf)
			conn.Write([]byte("HTTP/1.1 200 OK\r\n\r\n"))
			conn.Close()
			answered <- n
		}
	}()

	// A recording proxy between the two nodes.
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	var captured bytes.Buffer
	var mu sync.Mutex
	go func() {
		in, err := proxy.Accept()
		if err != nil {
			return
		}
		defer in.Close()
		out, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			return
		}
		defer out.Close()
		go io.Copy(in, out)
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			mu.Lock()
			captured.Write(buf[:n])
			mu.Unlock()
			if n > 0 {
				out.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()

	request := "POST /internal/v1/creates HTTP/1.1\r\nAuthorization: Bearer operator-token\r\n\r\n"
	conn, err := client.DialInternal(proxy.Addr().String(), waitLimit)
	if err != nil {
		t.Fatalf("DialInternal through the proxy: %v", err)
	}
	conn.SetDeadline(time.Now().Add(waitLimit))
	conn.Write([]byte(request))
	reply, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.HasPrefix(string(reply), "HTTP/1.1 200") {
		t.Fatalf("the real request got %q", reply)
	}
	select {
	case <-answered:
	case <-time.After(waitLimit):
		t.Fatal("the real request never arrived")
	}
	mu.Lock()
	wire := captured.Bytes()
	mu.Unlock()
	for _, secret := range []string{"/internal/v1/creates", "operator-token", "POST"} {
		if bytes.Contains(wire, []byte(secret)) {
			t.Fatalf("the captured bytes show %q", secret)
		}
	}

	// Replay everything the client sent on a new connection.
	replay, err := net.DialTimeout("tcp", srv.Addr().String(), waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	replay.SetDeadline(time.Now().Add(waitLimit))
	replay.Write(wire)
	got, _ := io.ReadAll(replay)
	if bytes.Contains(got, []byte("HTTP/1.1")) {
		t.Fatalf("the replay was answered: %q", got)
	}
	select {
	case n := <-answered:
		t.Fatalf("the replayed request reached the internal acceptor (%d bytes)", n)
	default:
	}
}

// transportFor is raft's NetworkTransport over a StreamLayer with key, or
// raft's own plain TCP transport when key is nil (what a keyless process
// speaks).
func transportFor(t *testing.T, key *Key) *raft.NetworkTransport {
	t.Helper()
	if key != nil {
		return raft.NewNetworkTransport(newLayer(t, key), 3, 2*time.Second, io.Discard)
	}
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return trans
}

// TestRaftTransport sends one AppendEntries RPC through raft's
// NetworkTransport over StreamLayers, and between one and a plain TCP
// transport.
func TestRaftTransport(t *testing.T) {
	key, _ := newTestKey(t)
	otherKey, _ := newTestKey(t)
	tests := []struct {
		name       string
		sender     *Key // nil: raft's plain TCP transport
		receiver   *Key
		wantArrive bool
	}{
		{"same key", key, key, true},
		{"different keys", key, otherKey, false},
		{"plain sender, keyed receiver", nil, key, false},
		{"keyed sender, plain receiver", key, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			send := transportFor(t, tt.sender)
			defer send.Close()
			recv := transportFor(t, tt.receiver)
			defer recv.Close()

			got := make(chan *raft.AppendEntriesRequest, 1)
			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case rpc := <-recv.Consumer():
						if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
							select {
							case got <- req:
							default:
							}
						}
						rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
					case <-done:
						return
					}
				}
			}()
			defer wg.Wait()
			defer close(done)

			req := &raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ID: []byte("a"), Addr: []byte(send.LocalAddr())},
				Term:      7,
				Entries:   []*raft.Log{{Index: 1, Term: 7, Type: raft.LogCommand, Data: []byte("create abc")}},
			}
			var resp raft.AppendEntriesResponse
			err := send.AppendEntries("b", recv.LocalAddr(), req, &resp)

			if !tt.wantArrive {
				if err == nil {
					t.Fatal("AppendEntries succeeded; want an error")
				}
				t.Logf("AppendEntries: %v", err)
				select {
				case r := <-got:
					t.Fatalf("receiver got an RPC: %+v", r)
				default:
				}
				return
			}
			if err != nil {
				t.Fatalf("AppendEntries: %v", err)
			}
			if !resp.Success || resp.Term != 7 {
				t.Fatalf("response %+v", resp)
			}
			select {
			case r := <-got:
				if r.Term != 7 || len(r.Entries) != 1 || !bytes.Equal(r.Entries[0].Data, []byte("create abc")) {
					t.Fatalf("receiver got %+v", r)
				}
			case <-time.After(waitLimit):
				t.Fatal("receiver never saw the RPC")
			}
		})
	}
}

// TestOneSourceCannotFillThePendingSlots: a host that opens connections and
// sends nothing holds at most maxPendingPerSource of the slots for
// connections being sorted; its next one is closed at once, while a
// connection from another address is still taken in.
func TestOneSourceCannotFillThePendingSlots(t *testing.T) {
	key, _ := newTestKey(t)
	srv, err := newStreamLayer("127.0.0.1:0", &net.TCPAddr{IP: loopback()}, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dialFrom := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: waitLimit}
		c, err := d.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedSoon reports whether the server hangs up on c within a
	// moment (it never does for a tracked connection: the handshake
	// timeout is a minute).
	closedSoon := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}
	for range maxPendingPerSource {
		dialFrom("127.0.0.1")
	}
	if !closedSoon(dialFrom("127.0.0.1")) {
		t.Fatal("a source holding every slot it may was given one more")
	}
	if closedSoon(dialFrom("127.0.0.2")) {
		t.Fatal("another source was refused while one source was at its limit")
	}
}

// TestSourceKey: a host cannot take more pending slots by drawing new
// IPv6 addresses from its /64; IPv4 addresses, mapped or not, count alone.
func TestSourceKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:fffe", true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"fe80::1%eth0", "fe80::2%eth1", true},
		{"192.0.2.1", "::ffff:192.0.2.1", true},
		{"192.0.2.1", "192.0.2.2", false},
	} {
		a, b := sourceKey(netip.MustParseAddr(tc.a)), sourceKey(netip.MustParseAddr(tc.b))
		if (a == b) != tc.same {
			t.Errorf("%s and %s count as %v and %v; same source: %v", tc.a, tc.b, a, b, tc.same)
		}
	}
}
