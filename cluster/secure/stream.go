package secure

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// defaultHandshakeTimeout bounds the TLS handshake and the first byte of an
// accepted connection, and a dial when raft passes no timeout.
const defaultHandshakeTimeout = 10 * time.Second

// maxPendingConns bounds the accepted connections that have not yet
// completed their handshake and sent their first byte. Beyond it new
// connections are closed at once: a flood of silent clients costs the
// listener nothing but file descriptors it frees immediately.
const maxPendingConns = 256

// maxPendingPerSource bounds the connections one source (an IPv4 address,
// an IPv6 /64: sourceKey) may have in that state, so one host without the key cannot fill every slot and
// lock the peers out. A peer opens a few at once at most (Raft's pool,
// the internal client's relays, up to 4 in flight); nodes sharing one
// host (a development cluster on 127.0.0.1) share the bound.
const maxPendingPerSource = 32

// InternalByte is the first byte a node writes on a connection that
// carries node-to-node HTTP rather than Raft (inside TLS). Raft
// connections carry no header: raft's NetworkTransport starts each with its
// RPC type (0 to 3), so nodes of a version without the multiplexer still
// reach this one's Raft, and this value is not one of them.
const InternalByte byte = 0xF1

// StreamLayer is a raft.StreamLayer over TCP that also carries the
// cluster's internal HTTP on the same port. Every connection, in both
// directions, is mutual TLS pinned to the cluster key. Each accepted
// connection is handshaked and its first byte read on a goroutine of its
// own; InternalByte sends it to Internal(), anything else to Accept
// (raft), with the byte put back.
type StreamLayer struct {
	listener         net.Listener
	advertise        net.Addr
	tlsConfig        *tls.Config
	handshakeTimeout time.Duration

	raftConns     chan net.Conn
	internalConns chan net.Conn
	closed        chan struct{}
	closeOnce     sync.Once
	sorting       sync.WaitGroup

	mu       sync.Mutex
	pending  map[net.Conn]struct{} // connections being sorted; Close closes them
	bySource map[netip.Addr]int    // pending connections per source address
}

var _ raft.StreamLayer = (*StreamLayer)(nil)

// NewStreamLayer listens on bindAddr and returns a StreamLayer that tells
// peers to dial advertise and talks only to holders of key, which it
// requires: there is no plain-TCP mode, loopback included.
//
// advertise must be a *net.TCPAddr with a specific IP: other nodes store and
// dial this address, and 0.0.0.0 or :: would point them at themselves. If its
// port is 0 the bound port is used, so callers binding ":0" (tests) can still
// advertise a dialable address.
func NewStreamLayer(bindAddr string, advertise net.Addr, key *Key) (*StreamLayer, error) {
	return newStreamLayer(bindAddr, advertise, key, defaultHandshakeTimeout)
}

func newStreamLayer(bindAddr string, advertise net.Addr, key *Key, handshakeTimeout time.Duration) (*StreamLayer, error) {
	if key == nil {
		return nil, errors.New("raft transport: no cluster key")
	}
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
	s := &StreamLayer{
		listener: ln, advertise: adv, tlsConfig: key.TLSConfig(), handshakeTimeout: handshakeTimeout,
		raftConns: make(chan net.Conn), internalConns: make(chan net.Conn),
		closed: make(chan struct{}), pending: map[net.Conn]struct{}{}, bySource: map[netip.Addr]int{},
	}
	s.sorting.Add(1)
	go s.acceptLoop()
	return s, nil
}

// acceptLoop accepts connections until the listener closes and sorts each
// on its own goroutine, so a client that connects and stays silent stalls
// nobody.
func (s *StreamLayer) acceptLoop() {
	defer s.sorting.Done()
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // a transient failure (EMFILE shows as a timeout): try again
			}
			return // closed
		}
		if !s.track(conn) {
			conn.Close() // too many connections being sorted, or closing
			continue
		}
		s.sorting.Add(1)
		go func() {
			defer s.sorting.Done()
			s.sort(conn)
		}()
	}
}

// track records a connection being sorted, unless there are too many or
// the layer is closing.
func (s *StreamLayer) track(conn net.Conn) bool {
	src := sourceOf(conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil || len(s.pending) >= maxPendingConns || s.bySource[src] >= maxPendingPerSource {
		return false
	}
	s.pending[conn] = struct{}{}
	s.bySource[src]++
	return true
}

func (s *StreamLayer) untrack(conn net.Conn) {
	src := sourceOf(conn)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pending[conn]; !ok {
		return
	}
	delete(s.pending, conn)
	if s.bySource[src] <= 1 {
		delete(s.bySource, src)
	} else {
		s.bySource[src]--
	}
}

// sourceOf is the source a connection counts against: its address (the
// zero Addr for a connection that is not TCP), by sourceKey.
func sourceOf(conn net.Conn) netip.Addr {
	if tcp, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return sourceKey(tcp.AddrPort().Addr())
	}
	return netip.Addr{}
}

// sourceKey is what a source address counts as: an IPv4 address itself,
// and an IPv6 address its /64, which one host is given whole and can
// draw a new address from for every connection.
func sourceKey(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	if addr.Is6() {
		return netip.PrefixFrom(addr.WithZone(""), 64).Masked().Addr()
	}
	return addr
}

// sort completes the handshake and reads the first byte of conn within
// the handshake timeout, then hands it to the acceptor of its kind.
func (s *StreamLayer) sort(raw net.Conn) {
	conn, first, err := s.open(raw)
	s.untrack(raw)
	if err != nil {
		raw.Close()
		return
	}
	to := s.raftConns
	if first == InternalByte {
		to = s.internalConns
	} else {
		conn = &prefixConn{Conn: conn, first: first, unread: true}
	}
	select {
	case to <- conn:
	case <-s.closed:
		conn.Close()
	}
}

// open handshakes and reads the first byte, bounded by the handshake
// timeout; the deadline is cleared for the connection's owner.
func (s *StreamLayer) open(raw net.Conn) (net.Conn, byte, error) {
	deadline := time.Now().Add(s.handshakeTimeout)
	if err := raw.SetDeadline(deadline); err != nil {
		return nil, 0, err
	}
	conn := tls.Server(raw, s.tlsConfig)
	if err := conn.Handshake(); err != nil {
		return nil, 0, fmt.Errorf("accept from %v (mutual tls): %w", raw.RemoteAddr(), err)
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return nil, 0, fmt.Errorf("accept from %v: first byte: %w", raw.RemoteAddr(), err)
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, 0, err
	}
	return conn, b[0], nil
}

// prefixConn gives back the first byte the layer read to sort it.
type prefixConn struct {
	net.Conn
	first  byte
	unread bool
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if c.unread && len(b) > 0 {
		b[0], c.unread = c.first, false
		return 1, nil
	}
	return c.Conn.Read(b)
}

// Dial connects to a peer for Raft. The TLS handshake finishes inside
// Dial and within timeout (the same budget covers the TCP connect), so a
// peer without the cluster key makes Dial fail rather than a later write.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
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

// DialInternal connects to a peer's internal HTTP: a Raft connection that
// starts with InternalByte.
func (s *StreamLayer) DialInternal(address string, timeout time.Duration) (net.Conn, error) {
	conn, err := s.Dial(raft.ServerAddress(address), timeout)
	if err != nil {
		return nil, err
	}
	if err := conn.SetWriteDeadline(time.Now().Add(s.handshakeTimeout)); err == nil {
		_, err = conn.Write([]byte{InternalByte})
		if err == nil {
			err = conn.SetWriteDeadline(time.Time{})
		}
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("internal dial %s: %w", address, err)
	}
	return conn, nil
}

// Accept waits for the next Raft connection: one that completed the
// handshake and whose first byte is not InternalByte.
func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case conn := <-s.raftConns:
		return conn, nil
	case <-s.closed:
		return nil, net.ErrClosed // raft checks for shutdown itself
	}
}

// Internal is the listener of the internal HTTP connections. Closing it
// stops only its acceptor; the layer's Close closes the port.
func (s *StreamLayer) Internal() net.Listener {
	return &internalListener{s: s, closed: make(chan struct{})}
}

type internalListener struct {
	s      *StreamLayer
	closed chan struct{}
	once   sync.Once
}

func (l *internalListener) Accept() (net.Conn, error) {
	select {
	case conn := <-l.s.internalConns:
		return conn, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.s.closed:
		return nil, net.ErrClosed
	}
}

func (l *internalListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *internalListener) Addr() net.Addr { return l.s.advertise }

// Close stops the listener, closes the connections still being sorted and
// waits for their goroutines. Established connections are their owners'.
func (s *StreamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.listener.Close()
		s.mu.Lock()
		for conn := range s.pending {
			conn.Close()
		}
		s.pending = nil
		s.mu.Unlock()
		s.sorting.Wait()
	})
	return err
}

// Addr is the advertised address, which raft stores in its configuration and
// hands to peers.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }
