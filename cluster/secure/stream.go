package secure

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// defaultHandshakeTimeout bounds the TLS handshake of an accepted connection,
// and of a dial when raft passes no timeout.
const defaultHandshakeTimeout = 10 * time.Second

// StreamLayer is a raft.StreamLayer over TCP. With a non-nil key every
// connection, in both directions, is mutual TLS pinned to the cluster key;
// with a nil key it is plain TCP like raft.NewTCPTransport.
type StreamLayer struct {
	listener         net.Listener
	advertise        net.Addr
	tlsConfig        *tls.Config // nil: plain TCP
	handshakeTimeout time.Duration
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// NewStreamLayer listens on bindAddr and returns a StreamLayer that tells
// peers to dial advertise.
//
// advertise must be a *net.TCPAddr with a specific IP: other nodes store and
// dial this address, and 0.0.0.0 or :: would point them at themselves. If its
// port is 0 the bound port is used, so callers binding ":0" (tests) can still
// advertise a dialable address.
func NewStreamLayer(bindAddr string, advertise net.Addr, key *Key) (*StreamLayer, error) {
	if advertise == nil {
		return nil, errors.New("raft transport: no advertise address: set --advertise")
	}
	adv, ok := advertise.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("raft transport: advertise address %v is not a TCP address: set --advertise", advertise)
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft transport: advertise address %v is not reachable by other nodes: set --advertise", advertise)
	}
	ln, err := net.Listen("tcp", bindAddr)
	if err != nil {
		return nil, fmt.Errorf("raft transport: listen on %q: %w", bindAddr, err)
	}
	if adv.Port == 0 {
		bound, ok := ln.Addr().(*net.TCPAddr)
		if !ok {
			ln.Close()
			return nil, fmt.Errorf("raft transport: listener address %v is not TCP", ln.Addr())
		}
		adv = &net.TCPAddr{IP: adv.IP, Port: bound.Port, Zone: adv.Zone}
	}
	s := &StreamLayer{listener: ln, advertise: adv, handshakeTimeout: defaultHandshakeTimeout}
	if key != nil {
		s.tlsConfig = key.TLSConfig()
	}
	return s, nil
}

// Dial connects to a peer. With a key, the TLS handshake finishes inside
// Dial and within timeout (the same budget covers the TCP connect), so a
// peer without the cluster key makes Dial fail rather than a later write.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.tlsConfig == nil {
		conn, err := net.DialTimeout("tcp", string(address), timeout)
		if err != nil {
			return nil, fmt.Errorf("raft dial %s: %w", address, err)
		}
		return conn, nil
	}
	if timeout <= 0 {
		// Never let an unresponsive peer hold a handshake open forever.
		timeout = s.handshakeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := &tls.Dialer{Config: s.tlsConfig}
	conn, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("raft dial %s (mutual tls): %w", address, err)
	}
	return conn, nil
}

// Accept waits for the next connection. With a key it does NOT handshake:
// a client that connects and stays silent would otherwise stall Accept, and
// with it every other peer. The returned conn handshakes on its first Read
// or Write (raft's per-connection goroutine reads at once), bounded by the
// handshake timeout; until the handshake succeeds no byte reaches the caller.
func (s *StreamLayer) Accept() (net.Conn, error) {
	conn, err := s.listener.Accept()
	if err != nil {
		return nil, err // raft checks for shutdown itself; keep the error as is
	}
	if s.tlsConfig == nil {
		return conn, nil
	}
	return &serverConn{Conn: tls.Server(conn, s.tlsConfig), timeout: s.handshakeTimeout}, nil
}

// Close stops the listener. Established connections are the caller's.
func (s *StreamLayer) Close() error { return s.listener.Close() }

// Addr is the advertised address, which raft stores in its configuration and
// hands to peers.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// serverConn is an accepted TLS connection whose handshake runs on first use
// with a deadline.
//
// The bound comes from HandshakeContext with a timeout context rather than
// SetDeadline: when the context expires, crypto/tls closes the underlying
// connection, which unblocks the handshake, and no deadline the caller may
// already have set is overwritten or cleared afterwards. The sync.Once makes
// concurrent first Read and Write share one handshake and one result.
type serverConn struct {
	*tls.Conn
	timeout time.Duration
	once    sync.Once
	err     error
}

func (c *serverConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		if err := c.Conn.HandshakeContext(ctx); err != nil {
			c.err = fmt.Errorf("raft accept from %v (mutual tls): %w", c.Conn.RemoteAddr(), err)
			// A failed handshake leaves nothing usable; drop the socket now
			// instead of waiting for the caller to notice.
			c.Conn.Close()
		}
	})
	return c.err
}

func (c *serverConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *serverConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
