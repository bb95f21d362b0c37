// Package wire is the node-to-node protocol of linkraft, both ends of it:
// the paths and headers, the messages and their encoding, the client every
// node uses to reach another, how a request is marked as a peer's, the
// table that carries the state machine's refusals across, and the
// problem+json writer that this protocol and the public API share.
//
// Package cluster serves the exchanges (its handlers need the node's Raft
// and state) and is this client's only user; httpd uses the headers, the
// refusal table and the problem writer. cluster/DESIGN.md documents every
// exchange.
package wire

import (
	"errors"
	"fmt"

	"github.com/linkraft/linkraft/fsm"
)

// The protocol's root, paths and bound on bodies. Each path is one
// exchange: PathNode asks any node who it is (id, cluster, gossip address,
// entry level), PathReadIndex asks the leader for a read index, PathLinks
// asks it for one link on behalf of a node that is behind, PathClicks
// hands it a node's click batch to apply, PathLeave asks it to remove the
// sending server, PathApplied asks any node how far it has applied the
// log, and PathCreates relays a follower's prepared creates to the
// leader, PathNonvoter asks a server to remain a non-voter, and
// PathRemoved tells a server that an operator removed it.
// cluster/DESIGN.md gives each one's request and answer.
const (
	// Prefix is the root of every exchange.
	Prefix = "/internal/v1/"
	// MaxBodyBytes is the largest request body the protocol sends: a
	// click batch of up to 4096 codes of up to 64 bytes, or a batch of
	// relayed creates (bounded below it by the sender).
	MaxBodyBytes = 4 << 20

	PathNode      = Prefix + "node"
	PathReadIndex = Prefix + "read-index"
	PathLinks     = Prefix + "links/" // + path-escaped code, and ?LinkBytesParam=1
	PathClicks    = Prefix + "clicks"
	PathLeave     = Prefix + "leave"
	PathApplied   = Prefix + "applied" // ?index=N
	PathCreates   = Prefix + "creates"
	PathNonvoter  = Prefix + "non-voter"
	PathRemoved   = Prefix + "removed"
)

// LinkBytesParam is the query parameter with which GET links/{code} asks
// for the link as LinkAnswer.LinkBytes. Builds before fsm.LevelWire do not
// send it, and their answers ignore it: each side gets the form it reads.
const LinkBytesParam = "link_bytes"

// Headers of node-to-node requests, the forwarded public ones included.
const (
	// ForwardedHeader names the node that sent the request. Its receiver
	// never forwards the request again, so leadership changes cannot make
	// requests loop.
	ForwardedHeader = "X-Linkraft-Forwarded"
	// AppliedIndexHeader carries, on the leader's answer to a forwarded
	// write, the log index the write was applied at: the forwarding node
	// applies that far before it answers its client.
	AppliedIndexHeader = "X-Linkraft-Applied-Index"
	// VisitorHeader carries, on a visit to a limited link a node forwards
	// to the leader, the visitor as that node saw it (fsm.EncodeVisitor,
	// in unpadded base64url): the leader sees the node's address, not the
	// visitor's.
	VisitorHeader = "X-Linkraft-Visitor"
	// ClientHeader carries, on a request a node forwards to the leader,
	// the address of the client it came from: the leader sees the
	// forwarding node's, and budgets per client what it does for the
	// request (hashing a password, checking a guess at a link's
	// password). Believed only from a peer.
	ClientHeader = "X-Linkraft-Client"
	// PastExpiryHeader marks, on an edit a node forwards to the leader, a
	// request of a compatible API that takes an expiry in the past: it
	// disables the link (Shlink's validUntil), where linkraft's own API
	// refuses it. Believed only from a peer.
	PastExpiryHeader = "X-Linkraft-Past-Expiry"
)

// Version is the "v" of every JSON message. A change that an older node
// would misread gets a new version (and a new Prefix when the paths
// change); adding a field that older nodes may ignore does not.
const Version = 1

// NodeInfo answers GET node: who this server is and where its gossip
// listens.
type NodeInfo struct {
	V          int    `json:"v"`
	ID         string `json:"id"`
	Cluster    string `json:"cluster_id"`            // empty until the cluster is initialised
	GossipAddr string `json:"gossip_addr,omitempty"` // for a member whose gossip lost this one
	// EntryLevel is the level of the node's build (fsm.EntryLevel): the
	// log entry types it applies and the encodings it reads in these
	// messages; builds before levels send none (level 1).
	EntryLevel int `json:"entry_level,omitempty"`
	// Wants is the suffrage the server asks for: WantsVoter, or
	// WantsNonvoter for a read replica (--read-replica, or an operator's
	// non-voter join, see NonvoterRequest). Builds before learners send
	// none, and are never promoted on their own word.
	Wants string `json:"wants,omitempty"`
	// Incarnation is the random id of the data dir the server runs on,
	// made with it: a removed server is kept out by its id and this
	// (cluster/removed.go). Builds before removal records send none.
	Incarnation string `json:"incarnation,omitempty"`
}

// The suffrages a server may ask for (NodeInfo.Wants).
const (
	WantsVoter    = "voter"
	WantsNonvoter = "non-voter"
)

// ReadIndexAnswer answers GET read-index: an index that covers every write
// the leader acknowledged before the request.
type ReadIndexAnswer struct {
	V     int    `json:"v"`
	Index uint64 `json:"index"`
}

// LinkAnswer answers GET links/{code} for a node that is behind. A found
// link is in LinkBytes when the request asked for them (LinkBytesParam),
// in Link otherwise.
type LinkAnswer struct {
	V     int  `json:"v"`
	Found bool `json:"found"`
	// LinkBytes is the link in the state machine's own encoding
	// (fsm.EncodeLink).
	LinkBytes []byte `json:"link_bytes,omitempty"`
	// Link is the legacy form, for an asker of a build before
	// fsm.LevelWire; remove once no supported release predates LevelWire.
	Link *Link `json:"link,omitempty"`
}

// FSMLink is the link a found answer carries, from whichever form it came in.
func (a LinkAnswer) FSMLink() (fsm.Link, error) { return linkOf(a.LinkBytes, a.Link) }

// linkOf is the link of an answer: its encoded form when present, else
// the legacy one an older build answers with.
func linkOf(encoded []byte, legacy *Link) (fsm.Link, error) {
	switch {
	case len(encoded) > 0:
		return fsm.DecodeLink(encoded)
	case legacy != nil:
		return legacy.FSM()
	}
	return fsm.Link{}, errors.New("the answer holds no link")
}

// Link is a link in the legacy form of LinkAnswer and CreateResult; times
// are unix milliseconds, as in the state machine. It is kept solely for
// upgrades from builds before fsm.LevelWire, which read and send nothing
// else: remove once no supported release predates LevelWire.
type Link struct {
	ID         uint64 `json:"id"`
	Code       string `json:"code"`
	URL        string `json:"url"`
	Workspace  string `json:"workspace"`
	Canonical  string `json:"canonical,omitempty"`
	CreatedAt  int64  `json:"created_at_ms"`
	ExpiresAt  int64  `json:"expires_at_ms,omitempty"`
	Clicks     uint64 `json:"clicks"`
	LastAccess int64  `json:"last_access_ms,omitempty"`
	Domain     string `json:"domain,omitempty"`
	// Options in the state machine's own encoding (fsm.EncodeOptions): a
	// node that misses them would serve a protected link unprotected.
	Options []byte `json:"options,omitempty"`
}

// FromLink is l as the protocol carries it.
func FromLink(l fsm.Link) *Link {
	w := &Link{
		ID: l.ID, Code: l.Code, URL: l.URL, Workspace: l.Workspace, Canonical: l.Canonical,
		CreatedAt: l.CreatedAt, ExpiresAt: l.ExpiresAt, Clicks: l.Clicks, LastAccess: l.LastAccess,
		Domain: l.Domain,
	}
	if l.Options != nil {
		w.Options = fsm.EncodeOptions(l.Options)
	}
	return w
}

// FSM is the link w carries.
func (w *Link) FSM() (fsm.Link, error) {
	l := fsm.Link{
		ID: w.ID, Code: w.Code, URL: w.URL, Workspace: w.Workspace, Canonical: w.Canonical,
		CreatedAt: w.CreatedAt, ExpiresAt: w.ExpiresAt, Clicks: w.Clicks, LastAccess: w.LastAccess,
		Domain: w.Domain,
	}
	if len(w.Options) > 0 {
		o, err := fsm.DecodeOptions(w.Options)
		if err != nil {
			return fsm.Link{}, fmt.Errorf("link %s: %w", w.Code, err)
		}
		l.Options = o
	}
	return l, nil
}

// CreateBatch is the body of POST creates: creates that clients sent to a
// follower, validated and prepared there (canonical URL, absolute expiry),
// which the leader proposes through its own proposer queue. They travel in
// Entry once every server reads it (fsm.LevelWire), in Items before; a
// receiver reads Entry when it is present.
type CreateBatch struct {
	V int `json:"v"`
	// Entry is the creates as one sealed fsm.CreateBatch log entry
	// (fsm.CreateBatch.Encode; its clock is not read): every field of a
	// create reaches the leader.
	Entry []byte `json:"entry,omitempty"`
	// Items is the legacy form, for a leader of a build before
	// fsm.LevelWire; remove once no supported release predates LevelWire.
	Items []Create `json:"items,omitempty"`
}

// Create is one fsm.CreateRequest in the legacy form of CreateBatch, kept
// solely for upgrades from builds before fsm.LevelWire: remove once no
// supported release predates LevelWire. It lacks CreatedAt and Clicks, so
// a create that sets them is never sent in it (cluster/relay.go).
type Create struct {
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
	KeyID   string `json:"key_id,omitempty"`
	Domain  string `json:"domain,omitempty"`
	Options []byte `json:"options,omitempty"` // fsm.EncodeOptions
}

// CreateBatchAnswer answers POST creates with one result per item, in the
// order of the items.
type CreateBatchAnswer struct {
	V       int            `json:"v"`
	Results []CreateResult `json:"results"`
}

// CreateResult is the outcome of one relayed create. Without Error it
// carries the link: in LinkBytes when the batch came as an Entry, in Link
// when it came as Items. Error is a kind (see refusals.go) and Detail the
// message the leader's error had. Index is the log entry that decided the
// create: the relaying node applies that far before it answers its client.
type CreateResult struct {
	// LinkBytes is the link in the state machine's own encoding
	// (fsm.EncodeLink).
	LinkBytes []byte `json:"link_bytes,omitempty"`
	// Link is the legacy form, for a sender of a build before
	// fsm.LevelWire; remove once no supported release predates LevelWire.
	Link     *Link  `json:"link,omitempty"`
	Existing bool   `json:"existing,omitempty"`
	Index    uint64 `json:"index,omitempty"`
	Error    string `json:"error,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// FSMLink is the link a result without Error carries, from whichever form
// it came in.
func (r CreateResult) FSMLink() (fsm.Link, error) { return linkOf(r.LinkBytes, r.Link) }

// ClicksAnswer answers POST clicks, whose body is one click batch in the
// state machine's command encoding (fsm.ClickBatch.Encode): the leader proposes
// those bytes as they are. Applied is false for a batch applied before.
type ClicksAnswer struct {
	V       int  `json:"v"`
	Applied bool `json:"applied"`
}

// AppliedAnswer answers GET applied?index=N: the index this node has
// applied, once it reached N or the wait bound passed, whichever is first.
type AppliedAnswer struct {
	V     int    `json:"v"`
	Index uint64 `json:"index"`
}

// LeaveRequest is the body of POST leave: a node asks the leader to remove
// it from the configuration. ID must be the sender's own.
type LeaveRequest struct {
	V  int    `json:"v"`
	ID string `json:"id"`
}

// NonvoterRequest is the body of POST non-voter: the leader asks the
// server ID (which must be the receiver) to remain a non-voter from now
// on, for an operator who added it as one though it was started to vote.
// The answer is an Ack.
type NonvoterRequest struct {
	V  int    `json:"v"`
	ID string `json:"id"`
}

// RemovedNotice is the body of POST removed: the leader tells the server
// ID, running on the data dir of Incarnation, that an operator removed it
// from the cluster, which may not reach it through the log (it was down,
// or cut off, when it was removed). The receiver checks that both are its
// own (409 otherwise) and stops taking part; the answer is an Ack. Builds
// before removal records answer 404.
type RemovedNotice struct {
	V           int    `json:"v"`
	ID          string `json:"id"`
	Incarnation string `json:"incarnation"`
}

// Ack answers a request that has nothing else to say.
type Ack struct {
	V int `json:"v"`
}

// Message is what every message has in common: its version.
type Message interface{ version() int }

func (m NodeInfo) version() int          { return m.V }
func (m ReadIndexAnswer) version() int   { return m.V }
func (m LinkAnswer) version() int        { return m.V }
func (m ClicksAnswer) version() int      { return m.V }
func (m LeaveRequest) version() int      { return m.V }
func (m Ack) version() int               { return m.V }
func (m NonvoterRequest) version() int   { return m.V }
func (m RemovedNotice) version() int     { return m.V }
func (m AppliedAnswer) version() int     { return m.V }
func (m CreateBatch) version() int       { return m.V }
func (m CreateBatchAnswer) version() int { return m.V }
