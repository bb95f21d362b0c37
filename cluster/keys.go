package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/cluster/internal/ownfile"
	"github.com/linkraft/linkraft/fsm"
)

// CatchUp returns once this node has applied every write acknowledged
// anywhere before the call: one read-index round (shared with concurrent
// callers) and the wait for the local apply, bounded by the write timeout.
// A key this node does not know is refused only after it.
func (n *Node) CatchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Writes.Timeout)
	defer cancel()
	index, err := n.readRounds.do(ctx)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	if err := n.machine.waitApplied(ctx, index); err != nil {
		return fmt.Errorf("catch up to %d: %w", index, err)
	}
	return nil
}

// initialAdminKey mints the admin key a cluster with no API keys gets
// when its leader has no --admin-token, and writes it to file (mode 0600)
// before it is proposed, so a key the cluster accepts is never lost; the
// log names the file, never the key. A key whose proposal failed is
// replaced on the next attempt.
func initialAdminKey(file string) (fsm.KeyCreateCommand, error) {
	id, key, hash, err := fsm.MintKey(rand.Reader)
	if err != nil {
		return fsm.KeyCreateCommand{}, err
	}
	if err := ownfile.Write(file, []byte(key+"\n")); err != nil {
		return fsm.KeyCreateCommand{}, fmt.Errorf("initial admin key: %w", err)
	}
	now := time.Now().UnixMilli()
	return fsm.KeyCreateCommand{
		Key: fsm.APIKey{ID: id, Name: "initial admin key", Hash: hash, Scopes: fsm.ScopeAdmin,
			Workspaces: []string{fsm.AllWorkspaces}, CreatedAt: now},
		Now: now,
	}, nil
}
