package cluster

import (
	"context"
	"time"

	"github.com/linkraft/linkraft/cluster/certs"
	"github.com/linkraft/linkraft/fsm"
)

// ACMEConfig turns on certificates ordered from an ACME CA for the
// cluster (cluster/certs): the leader orders and renews one for each of
// Names and for every registered domain.
type ACMEConfig struct {
	certs.Config
	Names []string // the configured names (--acme-domains)
}

// certProposer writes certificate changes through Propose.
type certProposer struct{ n *Node }

func (p certProposer) ProposeCert(ctx context.Context, change fsm.CertCommand, visible bool) error {
	_, err := p.n.Propose(ctx, change, ProposeOptions{Visible: visible})
	return err
}

// newCertManager is the certificate duty of this node's leadership, or
// nil when ACME is off. Its names are the configured ones and every
// registered domain, read on each pass.
func newCertManager(n *Node, cfg *ACMEConfig) *certs.Manager {
	if cfg == nil {
		return nil
	}
	c := cfg.Config
	c.Logger = n.log.With("component", "acme")
	c.Names = func() []string {
		names := append([]string(nil), cfg.Names...)
		for _, d := range n.fsm.Domains() {
			names = append(names, d.Name)
		}
		return names
	}
	return certs.NewManager(c, n.fsm, certProposer{n}, n.cfg.Key)
}

// runCertificates runs the certificate duty once the cluster is raised to
// fsm.LevelCerts (older builds cannot apply its entries), until ctx ends.
func runCertificates(ctx context.Context, n *Node) {
	for n.fsm.Raised() < fsm.LevelCerts {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	n.certs.Run(ctx)
}

// FollowCertificates has s follow this node's state machine until Close
// begins (certs.Source.Follow): s keeps the certificates it serves for
// the next start, stops serving those kept at the last one once the
// state has caught up with them, and learns when it can serve every name.
// Call it once, before Close.
func (n *Node) FollowCertificates(s *certs.Source) {
	n.spawn(func() { s.Follow(n.stopping, machineProgress{n.machine}) })
}

// machineProgress is the state machine as a certs.Source follows it.
type machineProgress struct{ m *appliedFSM }

func (p machineProgress) Changed() <-chan struct{} { return p.m.applied.wait() }
func (p machineProgress) Applied() uint64          { return p.m.appliedIndex() }
