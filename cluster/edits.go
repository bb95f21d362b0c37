package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// Edit changes a link on the leader (httpd forwards the request here) and
// returns the link as the edit left it and the entry's index, once every
// server has applied it or the wait ran out, exactly as Delete does: after
// the answer, no node that reaches the leader redirects to the old target.
func (n *Node) Edit(ctx context.Context, c fsm.EditCommand) (fsm.Link, uint64, error) {
	c.Now = time.Now().UnixMilli()
	resp, index, err := n.proposeOneResult(ctx, c.Encode())
	if err != nil {
		return fsm.Link{}, 0, fmt.Errorf("edit %s: %w", c.Code, err)
	}
	l, ok := resp.(fsm.Link)
	if !ok {
		return fsm.Link{}, 0, fmt.Errorf("edit %s: the state machine answered %T", c.Code, resp)
	}
	n.awaitServers(index)
	return l, index, nil
}

// SetDomain registers, changes or removes a domain on the leader, with
// the same visibility as an edit.
func (n *Node) SetDomain(ctx context.Context, c fsm.DomainCommand) (uint64, error) {
	c.Now = time.Now().UnixMilli()
	index, err := n.proposeOne(ctx, c.Encode())
	if err != nil {
		return 0, fmt.Errorf("domain %s: %w", c.Domain.Name, err)
	}
	n.awaitServers(index)
	return index, nil
}

// Visit counts one visit to a link with a visit limit through the log, on
// the leader, and returns fsm.ErrVisitLimit once the limit is reached.
// Only limited links come here; every other click is batched (clicks.go).
// The visitor goes with it once every server applies visitors.
func (n *Node) Visit(ctx context.Context, code string, visitor fsm.Visitor) (uint64, error) {
	c := fsm.VisitCommand{Code: code, Now: time.Now().UnixMilli(), Visitor: visitor}
	c.HasVisitor = n.requireLevel(ctx, fsm.LevelVisits) == nil
	index, err := n.proposeOne(ctx, c.Encode())
	if err != nil {
		return 0, fmt.Errorf("visit %s: %w", code, err)
	}
	return index, nil
}
