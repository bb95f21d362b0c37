package cluster

import "github.com/linkraft/linkraft/fsm"

// The node-to-node protocol: HTTP on each node's public listener, under
// InternalPrefix. This package serves it (InternalHandler, service.go) and
// is its only client (client.go); DESIGN.md documents every exchange.
const (
	// InternalPrefix is where httpd mounts InternalHandler.
	InternalPrefix = "/internal/v1/"
	// MaxInternalBodyBytes is the largest request body the protocol sends:
	// a click batch of maxClickBatchCodes codes of up to 64 bytes, or a
	// batch of relayed creates (bounded by maxRelayBodyBytes, below it).
	MaxInternalBodyBytes = 4 << 20

	nodePath      = InternalPrefix + "node"
	readIndexPath = InternalPrefix + "read-index"
	linkPath      = InternalPrefix + "links/" // + path-escaped code
	clicksPath    = InternalPrefix + "clicks"
	leavePath     = InternalPrefix + "leave"
	appliedPath   = InternalPrefix + "applied" // ?index=N
	createsPath   = InternalPrefix + "creates"
)

// Headers of node-to-node requests, the forwarded public ones included.
const (
	// ForwardedHeader names the node that sent the request. Its receiver
	// never forwards the request again, so leadership changes cannot make
	// requests loop.
	ForwardedHeader = "X-Linkraft-Forwarded"
	signatureHeader = "X-Linkraft-Signature"
	signedAtHeader  = "X-Linkraft-Signed-At"
	// AppliedIndexHeader carries, on the leader's answer to a forwarded
	// delete, the log index the delete was applied at: the forwarding node
	// applies that far before it answers its client.
	AppliedIndexHeader = "X-Linkraft-Applied-Index"
	// RequestTimeHeader is when the client's request reached the node that
	// forwarded it (unix milliseconds). Nodes of this version no longer
	// forward creates as HTTP requests (they relay them in batches, see
	// relay.go); the header stays in the signature and is still honoured
	// on a create an older node forwards, so a mixed cluster keeps working.
	RequestTimeHeader = "X-Linkraft-Request-Time"
)

// protocolVersion is the "v" of every JSON message. A change that an older
// node would misread gets a new version (and a new InternalPrefix when the
// paths change); adding a field that older nodes may ignore does not.
const protocolVersion = 1

// nodeInfo answers GET node: who this server is and where its gossip
// listens. It is the one exchange open to anyone, because a leader asks it
// of a server that is not yet a member (to check its id and cluster before
// adding it), and it says little more than /health does.
type nodeInfo struct {
	V          int    `json:"v"`
	ID         string `json:"id"`
	Cluster    string `json:"cluster_id"`            // empty until the cluster is initialised
	GossipAddr string `json:"gossip_addr,omitempty"` // for a member whose gossip lost this one
}

// readIndexAnswer answers GET read-index: an index that covers every write
// the leader acknowledged before the request.
type readIndexAnswer struct {
	V     int    `json:"v"`
	Index uint64 `json:"index"`
}

// linkAnswer answers GET links/{code} for a node that is behind.
type linkAnswer struct {
	V     int       `json:"v"`
	Found bool      `json:"found"`
	Link  *wireLink `json:"link,omitempty"`
}

// wireLink is a link as the protocol carries it; times are unix
// milliseconds, as in the state machine.
type wireLink struct {
	ID         uint64 `json:"id"`
	Code       string `json:"code"`
	URL        string `json:"url"`
	Workspace  string `json:"workspace"`
	Canonical  string `json:"canonical,omitempty"`
	CreatedAt  int64  `json:"created_at_ms"`
	ExpiresAt  int64  `json:"expires_at_ms,omitempty"`
	Clicks     uint64 `json:"clicks"`
	LastAccess int64  `json:"last_access_ms,omitempty"`
}

func toWire(l fsm.Link) *wireLink {
	return &wireLink{
		ID: l.ID, Code: l.Code, URL: l.URL, Workspace: l.Workspace, Canonical: l.Canonical,
		CreatedAt: l.CreatedAt, ExpiresAt: l.ExpiresAt, Clicks: l.Clicks, LastAccess: l.LastAccess,
	}
}

func (w *wireLink) link() fsm.Link {
	return fsm.Link{
		ID: w.ID, Code: w.Code, URL: w.URL, Workspace: w.Workspace, Canonical: w.Canonical,
		CreatedAt: w.CreatedAt, ExpiresAt: w.ExpiresAt, Clicks: w.Clicks, LastAccess: w.LastAccess,
	}
}

// createBatch is the body of POST creates: creates that clients sent to a
// follower, validated and prepared there (canonical URL, absolute expiry),
// which the leader proposes through its own create batcher.
type createBatch struct {
	V     int          `json:"v"`
	Items []wireCreate `json:"items"`
}

// wireCreate is one fsm.CreateRequest as the protocol carries it.
type wireCreate struct {
	RequestID  string `json:"request_id,omitempty"`
	URL        string `json:"url"`
	Canonical  string `json:"canonical,omitempty"`
	Workspace  string `json:"workspace"`
	CustomCode string `json:"custom_code,omitempty"`
	Strategy   string `json:"strategy,omitempty"` // "hash"; empty for the counter
	Dedupe     bool   `json:"dedupe,omitempty"`
	ExpiresAt  int64  `json:"expires_at_ms,omitempty"`
	CodeLength int    `json:"code_length"`
	// KeyID is the API key the relaying node authenticated the create
	// with; the leader's state machine checks it again.
	KeyID string `json:"key_id,omitempty"`
}

// createBatchAnswer answers POST creates with one result per item, in the
// order of the items.
type createBatchAnswer struct {
	V       int                `json:"v"`
	Results []wireCreateResult `json:"results"`
}

// wireCreateResult is the outcome of one relayed create. Without Error it
// carries the link; Error is a kind (createErrorKind) and Detail the
// message the leader's error had. Index is the log entry that decided the
// create: the relaying node applies that far before it answers its client.
type wireCreateResult struct {
	Link     *wireLink `json:"link,omitempty"`
	Existing bool      `json:"existing,omitempty"`
	Index    uint64    `json:"index,omitempty"`
	Error    string    `json:"error,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// clicksAnswer answers POST clicks, whose body is one click batch in the
// state machine's command encoding (fsm.EncodeClicks): the leader proposes
// those bytes as they are. Applied is false for a batch applied before.
type clicksAnswer struct {
	V       int  `json:"v"`
	Applied bool `json:"applied"`
}

// appliedAnswer answers GET applied?index=N: the index this node has
// applied, once it reached N or the wait bound passed, whichever is first.
type appliedAnswer struct {
	V     int    `json:"v"`
	Index uint64 `json:"index"`
}

// leaveRequest is the body of POST leave: a node asks the leader to remove
// it from the configuration. ID must be the sender's own.
type leaveRequest struct {
	V  int    `json:"v"`
	ID string `json:"id"`
}

// ack answers a request that has nothing else to say.
type ack struct {
	V int `json:"v"`
}

// versioned is what every message has in common.
type versioned interface{ version() int }

func (m nodeInfo) version() int          { return m.V }
func (m readIndexAnswer) version() int   { return m.V }
func (m linkAnswer) version() int        { return m.V }
func (m clicksAnswer) version() int      { return m.V }
func (m leaveRequest) version() int      { return m.V }
func (m ack) version() int               { return m.V }
func (m appliedAnswer) version() int     { return m.V }
func (m createBatch) version() int       { return m.V }
func (m createBatchAnswer) version() int { return m.V }
