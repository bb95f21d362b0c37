package httpd

import (
	"context"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/backups"
	"github.com/linkraft/linkraft/cluster/clicks"
	"github.com/linkraft/linkraft/cluster/membership"
	"github.com/linkraft/linkraft/cluster/webhooks"
	"github.com/linkraft/linkraft/fsm"
)

// Node is what the HTTP layer asks of the cluster, grouped by what the
// handlers need, so each handler's dependency is visible: the read paths
// use Reads, the write paths Writes, the admin API Admin, the routes served
// by the leader Leader, health and metrics Self, and the redirect Clicks;
// the admin API's membership calls use Members.
// Of gives every part from one *cluster.Node; a test may replace a part
// with a fake.
type Node struct {
	Reads   Reads
	Writes  Writes
	Admin   Admin
	Members Members
	Leader  Leader
	Self    Self
	Hooks   Hooks
	Clicks  Clicks
	// Backups is the scheduled backups' state, nil without --backup-to.
	Backups Backups
}

// Reads is what serving links and credentials needs: the local state, the
// read-after-write lookup, and catching up with the leader. Handlers give
// them context.Background, never the request: a context derived from a
// fasthttp RequestCtx outlives the request in a goroutine of its own
// (TestHandlersWaitWithoutTheRequest); the node bounds every wait.
type Reads interface {
	FSM() *fsm.FSM
	Lookup(ctx context.Context, code string) (fsm.Link, error)
	Behind() bool
	CatchUp(ctx context.Context) error
}

// Writes is what changes the replicated state through Raft: links,
// visits to limited links, domains and keys. Its errors are mapped to statuses by errorStatuses
// (errors.go).
type Writes interface {
	// Propose applies any other command, on the leader.
	Propose(ctx context.Context, cmd fsm.Command, opts cluster.ProposeOptions) (cluster.Proposed, error)
	Create(ctx context.Context, req fsm.CreateRequest) (fsm.CreateResult, error)
	ProposeCreates(ctx context.Context, reqs []fsm.CreateRequest) *cluster.BulkCreates
	// ImportDone puts away what an import left (the memory of its log
	// entries); it returns when done.
	ImportDone()
}

// Admin is what the /admin routes do besides writes and membership: the
// cluster's status and whole-state backups.
type Admin interface {
	Status() (cluster.Status, error)
	Backup(w io.Writer) error
	BackupCompressed(w io.Writer) error
	Restore(backup []byte, opts cluster.RestoreOptions) error
	Spool(write func(io.Writer) error) (*os.File, int64, error)
}

// Members is what the /admin routes change of the membership: joins,
// promotions, removals and leadership (package membership). Its refusals
// are mapped by errorStatuses.
type Members interface {
	// by is the key asking, for the audit log.
	AddServer(id, raftAddr, httpAddr string, nonVoter bool, by string) error
	Promote(id, by string) error
	RemoveServer(id, by string) error
	TransferLeadership() error
}

// Hooks is what the webhook admin routes read besides the replicated
// state: the delivery state (the leader's).
type Hooks interface {
	Statuses() []webhooks.Status
}

// Leader is what the routes served by the leader need (forwarder):
// relaying a request to it, and serving those other nodes relay here.
type Leader interface {
	Forward(req *fasthttp.Request, resp *fasthttp.Response, opts cluster.ForwardOptions) (forwarded bool, err error)
	ServeForwarded(h fasthttp.RequestHandler)
}

// Self is the node's identity, role and readiness, for health, logs and
// metrics.
type Self interface {
	ID() string
	IsLeader() bool
	// Local is the node's own view: role, leader, term and indexes.
	Local() cluster.Local
	Collectors() []prometheus.Collector
	// NotReady is why the node must get no traffic, "" when it serves
	// redirects from its own state (readiness); WritesUnavailable is why a
	// create through it would be refused now, "" when it would be
	// accepted; Live is false once Raft has shut down (liveness).
	NotReady() string
	WritesUnavailable() string
	Live() bool
}

// Backups is what /health reads of the scheduled backups.
type Backups interface {
	// Overdue: this node writes the backups and two intervals passed
	// without a good one.
	Overdue() bool
}

// Clicks is this node's click counting: the click a redirect counts, and
// how many wait for a flush (metrics).
type Clicks interface {
	Record(code string, visitor fsm.Visitor)
	Pending() uint64
}

var (
	_ Reads   = (*cluster.Node)(nil)
	_ Writes  = (*cluster.Node)(nil)
	_ Admin   = (*cluster.Node)(nil)
	_ Members = (*membership.Membership)(nil)
	_ Leader  = (*cluster.Node)(nil)
	_ Self    = (*cluster.Node)(nil)
	_ Hooks   = (*webhooks.Delivery)(nil)
	_ Clicks  = (*clicks.Counter)(nil)
	_ Backups = (*backups.Scheduler)(nil)
)

// Of is every part of Node served by n.
func Of(n *cluster.Node) Node {
	node := Node{Reads: n, Writes: n, Admin: n, Members: n.Membership(), Leader: n, Self: n, Hooks: n.Webhooks(), Clicks: n.Clicks()}
	if b := n.Backups(); b != nil { // a nil *Scheduler must not become a non-nil interface
		node.Backups = b
	}
	return node
}
