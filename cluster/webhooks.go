package cluster

import (
	"context"

	"github.com/linkraft/linkraft/cluster/webhooks"
	"github.com/linkraft/linkraft/fsm"
)

// Webhooks is the webhook delivery (package webhooks): the leader loop
// runs it as a duty, and httpd reads its statuses.
func (n *Node) Webhooks() *webhooks.Delivery { return n.hooks }

// ackProposer proposes webhook acknowledgements for package webhooks,
// which cannot import this one: Propose with no options.
type ackProposer struct{ n *Node }

func (p ackProposer) Propose(ctx context.Context, cmd fsm.Command) error {
	_, err := p.n.Propose(ctx, cmd, ProposeOptions{})
	return err
}
