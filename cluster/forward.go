package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// Internal HTTP endpoints the leader serves to the other nodes, and the
// headers of node-to-node requests.
const (
	ReadIndexPath   = "/internal/v1/read-index"
	ClicksPath      = "/internal/v1/clicks"
	SignatureHeader = "X-Linkraft-Signature"
	// ForwardedHeader marks a request a node forwarded to the leader; the
	// receiver never forwards it again, so leadership changes cannot make
	// requests loop.
	ForwardedHeader = "X-Linkraft-Forwarded"
)

// ErrLeaderIsSelf tells Forward's caller to serve the request itself.
var ErrLeaderIsSelf = errors.New("this node is the leader")

// peers holds one fasthttp HostClient per peer HTTP address.
type peers struct {
	mu      sync.Mutex
	clients map[string]*fasthttp.HostClient
}

func (p *peers) client(addr string) *fasthttp.HostClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[addr]; ok {
		return c
	}
	c := &fasthttp.HostClient{
		Addr:                addr,
		Name:                "linkraft-forward",
		MaxConns:            1024,
		MaxIdleConnDuration: 30 * time.Second,
		// Forwarded requests are retried by Forward itself, idempotently.
		RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
	}
	if p.clients == nil {
		p.clients = map[string]*fasthttp.HostClient{}
	}
	p.clients[addr] = c
	return c
}

// leaderHTTP returns the leader's HTTP address, or self when this node leads.
func (n *Node) leaderHTTP() (addr string, self, ok bool) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return "", false, false
	}
	if string(id) == n.cfg.ID {
		return n.cfg.HTTPAddr, true, true
	}
	addr, ok = n.httpAddrOf(id)
	return addr, false, ok
}

// Forward sends req to the leader and fills resp. It waits for a leader
// until the write timeout and retries a request whose answer was lost on
// the way, so callers must make forwarded writes idempotent (creates carry
// an idempotency key). It returns ErrLeaderIsSelf when this node leads and
// ErrNoLeader when no leader answered in time.
func (n *Node) Forward(req *fasthttp.Request, resp *fasthttp.Response) error {
	deadline := time.Now().Add(n.cfg.WriteTimeout)
	req.Header.Set(ForwardedHeader, n.cfg.ID)
	n.sign(req)
	var lastErr error
	for {
		addr, self, ok := n.leaderHTTP()
		switch {
		case ok && self:
			return ErrLeaderIsSelf
		case ok:
			err := n.peers.client(addr).DoDeadline(req, resp, deadline)
			if err == nil {
				return nil
			}
			lastErr = err
		}
		if time.Now().Add(50 * time.Millisecond).After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("%w: %v", ErrNoLeader, lastErr)
			}
			return ErrNoLeader
		}
		select {
		case <-n.closing:
			return ErrClosed
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// callLeader makes a signed internal request to the leader and decodes its
// JSON answer into out.
func (n *Node) callLeader(ctx context.Context, method, path string, body []byte, out any) error {
	addr, self, ok := n.leaderHTTP()
	switch {
	case !ok:
		return ErrNoLeader
	case self:
		return ErrLeaderIsSelf
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + addr + path)
	req.SetBody(body)
	req.Header.Set(ForwardedHeader, n.cfg.ID)
	n.sign(req)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(n.cfg.WriteTimeout)
	}
	if err := n.peers.client(addr).DoDeadline(req, resp, deadline); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return fmt.Errorf("%s %s: leader answered %d: %w", method, path, resp.StatusCode(), ErrNoLeader)
	}
	if err := json.Unmarshal(resp.Body(), out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// signedMessage is what a node-to-node request's signature covers.
func signedMessage(req *fasthttp.Request) []byte {
	msg := append(req.Header.Method(), ' ')
	msg = append(msg, req.URI().RequestURI()...)
	msg = append(msg, '\n')
	return append(msg, req.Body()...)
}

// sign adds the cluster key's signature to a node-to-node request.
func (n *Node) sign(req *fasthttp.Request) {
	if n.cfg.Key != nil {
		req.Header.Set(SignatureHeader, n.cfg.Key.Sign(signedMessage(req)))
	}
}

// FromPeer reports whether a request comes from another node of this
// cluster: it carries the forwarded mark and, when a cluster key is set, a
// valid signature; without a key it must come from a gossip member's
// address. Such requests were already rate limited and authorised by the
// node that received them from the client.
func (n *Node) FromPeer(req *fasthttp.Request, remote net.IP) bool {
	if len(req.Header.Peek(ForwardedHeader)) == 0 {
		return false
	}
	if n.cfg.Key != nil {
		return n.cfg.Key.Verify(signedMessage(req), string(req.Header.Peek(SignatureHeader)))
	}
	if remote.IsLoopback() {
		return true
	}
	if n.gossip == nil {
		return false
	}
	for _, m := range n.gossip.members() {
		if host, _, err := net.SplitHostPort(m.RaftAddr); err == nil && net.ParseIP(host).Equal(remote) {
			return true
		}
	}
	return false
}

// ReadIndex returns an index that covers every write acknowledged before
// the call, following the ReadIndex recipe of the Raft thesis (as rqlite
// does): this node makes sure it has committed an entry of its own term (a
// barrier, once per term, so every earlier leader's writes are applied
// here), takes the index, and confirms with a heartbeat round that it is
// still the leader in the same term.
//
// The index is this FSM's applied index rather than the commit index: Raft
// never hands its own no-op and barrier entries to the FSM, so a commit
// index that ends on one is an index no FSM ever reports. Every write this
// leader acknowledged was applied here before it was acknowledged.
func (n *Node) ReadIndex() (uint64, error) {
	if !n.IsLeader() {
		return 0, ErrNoLeader
	}
	term := n.raft.CurrentTerm()
	if n.readyTerm.Load() != term {
		if err := n.raft.Barrier(n.readTimeout()).Error(); err != nil {
			return 0, fmt.Errorf("read index barrier: %w", ErrNoLeader)
		}
		n.readyTerm.Store(term)
	}
	index := n.appliedIndex()
	if err := n.raft.VerifyLeader().Error(); err != nil || n.raft.CurrentTerm() != term {
		return 0, ErrNoLeader
	}
	return index, nil
}

func (n *Node) readTimeout() time.Duration { return min(n.cfg.WriteTimeout, 2*time.Second) }

// fetchReadIndex asks the leader (possibly this node) for a read index. It
// keeps trying until the read timeout: during an election there is no
// leader for a moment, and a miss must wait for the next one rather than
// answer 404 for a code that exists.
func (n *Node) fetchReadIndex() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.readTimeout())
	defer cancel()
	for {
		index, err := n.readIndexOnce(ctx)
		if err == nil {
			return index, nil
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-n.closing:
			return 0, ErrClosed
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (n *Node) readIndexOnce(ctx context.Context) (uint64, error) {
	if n.IsLeader() {
		return n.ReadIndex()
	}
	var answer struct {
		Index uint64 `json:"index"`
	}
	if err := n.callLeader(ctx, fasthttp.MethodGet, ReadIndexPath, nil, &answer); err != nil {
		return 0, err
	}
	return answer.Index, nil
}

// CatchUp returns once this node has applied every write acknowledged
// before the call anywhere in the cluster. Callers use it to confirm a
// local miss before answering 404. Concurrent callers share one request to
// the leader per round trip, so a flood of unknown codes costs the leader
// one request per node at a time.
func (n *Node) CatchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.readTimeout())
	defer cancel()
	index, err := n.readRounds.do(ctx)
	if err != nil {
		return err
	}
	for n.appliedIndex() < index {
		select {
		case <-ctx.Done():
			return fmt.Errorf("catch up to index %d: %w", index, ErrTimeout)
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// appliedIndex is the index of the last entry the FSM has applied. Raft's
// own applied index is used only when the FSM has applied nothing since it
// started or was restored; then it is the restored snapshot's index.
func (n *Node) appliedIndex() uint64 {
	if i, ok := n.fsm.Applied(); ok {
		return i
	}
	return n.raft.AppliedIndex()
}

// ApplyClicks applies a click batch another node sent. Leader only.
func (n *Node) ApplyClicks(data []byte) (bool, error) {
	cmd, err := fsm.DecodeCommand(data)
	if _, ok := cmd.(fsm.ClickBatch); err != nil || !ok {
		return false, fmt.Errorf("not a click batch: %v", err)
	}
	if !n.IsLeader() {
		return false, ErrNoLeader
	}
	resp, err := n.apply(data)
	if err != nil {
		return false, err
	}
	applied, _ := resp.(bool)
	return applied, nil
}

// sendClicks hands a click batch to the leader.
func (n *Node) sendClicks(ctx context.Context, batch []byte) error {
	var answer struct {
		Applied bool `json:"applied"`
	}
	return n.callLeader(ctx, fasthttp.MethodPost, ClicksPath, batch, &answer)
}

// roundBatcher shares one call of fn among concurrent callers. A caller
// always waits for a round that starts after it arrived, so the result
// reflects everything that happened before the call.
type roundBatcher struct {
	fn func() (uint64, error)

	mu      sync.Mutex
	next    *round
	running bool
}

type round struct {
	done  chan struct{}
	value uint64
	err   error
}

func (b *roundBatcher) do(ctx context.Context) (uint64, error) {
	b.mu.Lock()
	if b.next == nil {
		b.next = &round{done: make(chan struct{})}
	}
	r := b.next
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.value, r.err
	case <-ctx.Done():
		return 0, fmt.Errorf("read index: %w", ErrTimeout)
	}
}

func (b *roundBatcher) run() {
	for {
		b.mu.Lock()
		r := b.next
		b.next = nil
		if r == nil {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		r.value, r.err = b.fn()
		close(r.done)
	}
}
