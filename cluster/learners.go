package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/internal/ownfile"
	"github.com/linkraft/linkraft/cluster/membership"
	"github.com/linkraft/linkraft/cluster/wire"
)

// Learners (package membership's learners.go has the whole): which
// non-voters are learners is the servers' own word, the suffrage each asks
// for in GET node (wire.NodeInfo.Wants), a voter unless it runs with
// --read-replica or an operator added it as a non-voter (then the leader
// tells it so first, POST non-voter, and it keeps that in its data dir).
// This file is a server's side of it, and the client's questions.

// nonvoterFile, in the data dir, records that an operator added this
// server as a non-voter: it asks to remain one across restarts.
const nonvoterFile = "non-voter"

// loadNonvoter reports whether this server asks to remain a non-voter:
// started with --read-replica, or told so at an operator's join.
func loadNonvoter(cfg Config) (bool, error) {
	if cfg.Membership.ReadReplica {
		return true, nil
	}
	_, err := os.Stat(filepath.Join(cfg.DataDir, nonvoterFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("read the non-voter mark: %w", err)
}

// wants is the suffrage this server asks for (wire.NodeInfo.Wants).
func (s *standing) wants() string {
	if s.nonvoter.Load() {
		return wire.WantsNonvoter
	}
	return wire.WantsVoter
}

// remainNonvoter makes this server ask to remain a non-voter from now on,
// at the leader's request (POST non-voter): written down first, so a
// restart keeps it, then said over gossip too.
func (s *standing) remainNonvoter(id string) error {
	n := s.n
	if id != n.cfg.ID {
		return fmt.Errorf("%w: this server is %q, not %q", ErrInvalidServer, n.cfg.ID, id)
	}
	if s.nonvoter.Load() {
		return nil
	}
	if err := ownfile.Write(filepath.Join(n.cfg.DataDir, nonvoterFile), []byte("added as a non-voter\n")); err != nil {
		return fmt.Errorf("write the non-voter mark: %w", err)
	}
	s.nonvoter.Store(true)
	if n.gossip != nil {
		n.gossip.updateMeta(func(m *memberMeta) { m.Replica = true })
	}
	n.log.Info("added as a non-voter: this server remains one until promoted")
	return nil
}

// tellNonvoter asks the server id at raftAddr to remain a non-voter. A
// build before learners has no such exchange (ErrRefused for its 404);
// it never asks to be promoted either, so that is no error.
func (c *peerClient) tellNonvoter(id, raftAddr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), membership.AskTimeout)
	defer cancel()
	body, err := json.Marshal(wire.NonvoterRequest{V: wire.Version, ID: id})
	if err != nil {
		return fmt.Errorf("encode a non-voter request: %w", err)
	}
	var ack wire.Ack
	err = c.call(ctx, raftAddr, fasthttp.MethodPost, wire.PathNonvoter, body, &ack)
	var status *wire.StatusError
	if errors.As(err, &status) && status.Status == fasthttp.StatusNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: asking %s to remain a non-voter: %v", ErrUnreachable, id, err)
	}
	return nil
}

// learners returns which of servers are learners: non-voters that answer
// GET node asking to be voters. Asked concurrently, bounded by ctx; one
// that does not answer is not a learner for now.
func (c *peerClient) learners(ctx context.Context, servers []raft.Server) map[raft.ServerID]bool {
	got := map[raft.ServerID]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		if s.Suffrage == raft.Voter || s.ID == c.self {
			continue
		}
		addr := string(c.addrs.resolve(s.ID, s.Address))
		wg.Go(func() {
			var info wire.NodeInfo
			if err := c.call(ctx, addr, fasthttp.MethodGet, wire.PathNode, nil, &info); err != nil {
				return
			}
			if info.ID == string(s.ID) && info.Wants == wire.WantsVoter {
				mu.Lock()
				got[s.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}
