package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/linkraft/linkraft/fsm/codes"
)

// commandType is the first byte of every log entry this FSM applies.
type commandType byte

const (
	cmdInit commandType = iota + 1
	cmdCreate
	cmdDelete
	cmdClicks
	cmdPurge
	cmdServer
	cmdKeyCreate
	cmdKeyRevoke
	// cmdCreateKeyed and cmdDeleteKeyed are cmdCreate and cmdDelete with
	// the id of the API key that made each write. The older types still
	// decode (logs replay entries written before keys), with no key.
	cmdCreateKeyed
	cmdDeleteKeyed
	// cmdCreateOptions is cmdCreateKeyed with each item's domain and
	// Options; what the write path proposes since links have them.
	cmdCreateOptions
	cmdEdit
	cmdDomain
	cmdVisit
	// cmdKeyCreateDomains is cmdKeyCreate followed by the key's domains.
	cmdKeyCreateDomains
	// cmdClicksVisitors and cmdVisitVisitor are cmdClicks and cmdVisit
	// with what each click says about its visitor (visitors.go).
	cmdClicksVisitors
	cmdVisitVisitor
	// Webhooks (webhooks.go): registering and removing one, and the
	// leader's acknowledgement of what it delivered.
	cmdWebhookSet
	cmdWebhookDelete
	cmdWebhookAck
	// cmdCreateImported is cmdCreateOptions with each item's creation
	// time and click total, which only an import sets.
	cmdCreateImported
	// cmdRaise raises the cluster to a level (raise.go); cmdAuditNote
	// records a membership change in the audit log.
	cmdRaise
	cmdAuditNote
	// cmdCert changes the certificates the cluster serves (certs.go).
	cmdCert
	// LevelVisitRows: cmdVisitsDelete forgets a link's visits
	// (tallies.go); cmdTags renames or deletes a tag on every link of a
	// workspace; cmdCreateExtended, cmdEditExtended and cmdDomainExtended
	// are cmdCreateOptions, cmdEdit and cmdDomain whose options and
	// domains carry the fields this level added (crawlable, browser and
	// address conditions, the invalid-link redirect).
	cmdVisitsDelete
	cmdTags
	cmdCreateExtended
	cmdEditExtended
	cmdDomainExtended
	// cmdOrphanVisitsDelete forgets every orphan visit (orphans.go).
	cmdOrphanVisitsDelete
	// LevelRemovals: cmdServerRemoval records a server an operator
	// removed from the cluster, or forgets that record (removals.go).
	cmdServerRemoval
	// LevelRename: cmdRename gives a link a new code and retires the old
	// one (rename.go).
	cmdRename
	// LevelTargets: cmdKeyCreateOwn is cmdKeyCreateDomains followed by
	// whether the key is limited to the links it creates (authors.go).
	cmdKeyCreateOwn
)

// sealedFlag in the type byte marks an entry that ends in a CRC-32C of
// everything before it. Every entry is written sealed; unsealed ones, from
// builds before the checksum, still decode. A disk that changes a byte of a
// stored entry is then caught instead of applied: bbolt keeps no checksums
// of the values it stores.
const (
	sealedFlag  = 0x80
	sealedBytes = 4
)

// ErrCorruptCommand means a log entry's checksum does not match its bytes.
var ErrCorruptCommand = errors.New("log entry does not match its checksum")

// Command is one change to the state as the log carries it. Every
// command type of this package implements it, and DecodeCommand returns
// one: a new replicated write is a new Command type and its row in
// features (registry.go), which decodes and applies it.
type Command interface {
	// Encode is the command's log entry: its type byte, its fields and
	// the checksum that seals them. It picks the oldest entry type that
	// carries the command, so that older builds apply what they can.
	Encode() []byte
	// Level is the entry level a node must apply to apply Encode's entry
	// (levels.go).
	Level() int
}

// Downgrader is a command that can also be written, with less in it, at
// a lower entry level: a cluster in the middle of an upgrade writes the
// downgrade rather than refuse the write.
type Downgrader interface {
	Command
	// Downgrade is the command as the level below its own carries it.
	Downgrade() Command
}

// seal marks an encoded entry as sealed and appends its checksum.
func seal(buf []byte) []byte {
	buf[0] |= sealedFlag
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, crcTable))
}

// unseal checks a sealed entry's checksum and returns it without the
// checksum and the flag's meaning: its type byte and its fields.
func unseal(data []byte) (commandType, []byte, error) {
	if data[0]&sealedFlag == 0 {
		return commandType(data[0]), data[1:], nil
	}
	if len(data) < 1+sealedBytes {
		return 0, nil, fmt.Errorf("decode command: %w: too short", ErrCorruptCommand)
	}
	body, ok := sealedBody(data)
	if !ok {
		return 0, nil, fmt.Errorf("decode command: %w", ErrCorruptCommand)
	}
	return commandType(data[0] &^ sealedFlag), body[1:], nil
}

// sealedBody is sealed bytes (an entry, an encoded link) without their
// checksum, and whether the checksum matches them. data holds at least
// the checksum.
func sealedBody(data []byte) ([]byte, bool) {
	body, sum := data[:len(data)-sealedBytes], data[len(data)-sealedBytes:]
	return body, crc32.Checksum(body, crcTable) == binary.BigEndian.Uint32(sum)
}

// Strategy chooses how a create without a custom code gets its code.
type Strategy byte

const (
	// StrategyCounter derives the code from the replicated per-length
	// counter through the keyed permutation (codes.CounterCode).
	StrategyCounter Strategy = iota
	// StrategyHash derives the code from the canonical URL and workspace.
	StrategyHash
)

// InitCommand sets the permutation key and the cluster's identity. It is
// proposed once by the first leader; later ones are ignored so every node
// keeps the first one applied.
type InitCommand struct {
	Key       codes.Key
	ClusterID [16]byte // tells this cluster's nodes from another cluster's
}

// CreateRequest is one create inside a CreateBatch. Its fields are already
// validated by the HTTP layer; Apply still rejects what would corrupt state.
type CreateRequest struct {
	// RequestID makes a retried create idempotent: a second request with the
	// same ID inside the idempotency window returns the first one's link.
	RequestID string
	URL       string
	// Canonical is the canonical form of URL (codes.Canonicalize), required
	// for dedupe and hash creates. It is computed before proposing so that
	// every replica uses the same bytes whatever its Go version parses.
	Canonical  string
	Workspace  string
	CustomCode string
	Strategy   Strategy
	Dedupe     bool
	ExpiresAt  int64 // unix milliseconds, 0 for never
	CodeLength int   // counter code length for this create
	// KeyID is the API key the create was made with: "" for an anonymous
	// (public) create, RootKeyID for the operator's token.
	KeyID string
	// Domain is the registered domain the link lives in; "" for the
	// default one. CustomCode is unique within it.
	Domain  string
	Options *Options // nil: none
	// CreatedAt and Clicks carry what an import read from another
	// shortener's export: when the link was created there (unix
	// milliseconds; 0: at the entry's clock, as any create) and the clicks
	// it had, which start its total. Nothing else sets them, and a create
	// with either needs entry level LevelImport.
	CreatedAt int64
	Clicks    uint64
}

// MaxImportedClicks bounds the click total an import may bring: far
// beyond any real link's, far below what later clicks could overflow,
// and exact as a JSON number in every client (below 2^53).
const MaxImportedClicks = 1_000_000_000_000

// CreateBatch carries many creates in one log entry, all stamped with the
// leader's clock.
type CreateBatch struct {
	Now   int64 // unix milliseconds
	Items []CreateRequest
}

// DeleteCommand removes a link and tombstones its code.
type DeleteCommand struct {
	Code  string
	Now   int64
	KeyID string // the API key that asked for it, as in CreateRequest
}

// ClickCount is the number of redirects one node served for one code to
// visitors alike in every class a Visitor records.
type ClickCount struct {
	Code    string
	Count   uint64
	Visitor Visitor // zero in a batch without visitors
}

// ClickBatch is one node's aggregated clicks. Seq grows with every batch
// from that node; a batch whose Seq is not above the last applied one from
// the same node is a retry and is ignored, which makes flushes exactly-once.
type ClickBatch struct {
	Node   string
	Seq    uint64
	Now    int64 // the flushing node's clock: becomes last_accessed_at
	Counts []ClickCount
	// Visitors: each count carries its Visitor (entry level LevelVisits).
	// Batches of older builds, and of a cluster still being upgraded
	// (WithoutVisitors), count clicks only.
	Visitors bool
}

// PurgeCommand tombstones links that expired before ExpiredBefore and forgets
// idempotency records older than RequestsBefore.
type PurgeCommand struct {
	ExpiredBefore  int64
	RequestsBefore int64
}

// ServerCommand records the HTTP address of a cluster member, which
// operators' views of the cluster show. An empty HTTPAddr forgets the
// member.
type ServerCommand struct {
	ID       string
	HTTPAddr string
}

// ServerRemovalCommand records that an operator removed server ID from the
// cluster, with Incarnation, the random id of the data dir it ran on
// (empty when the leader could not learn it), and forgets the server's HTTP
// address: no leader adds the server back, and the server itself, seeing
// the record, stops taking part (removals.go). With Forget it drops the
// record instead: an operator joined a server of that id that runs on a
// new data dir.
type ServerRemovalCommand struct {
	ID          string
	Incarnation string
	Forget      bool
}

// Encode is the init's log entry (Command): the key and the cluster's id.
func (c InitCommand) Encode() []byte {
	e := encoder{buf: make([]byte, 0, 1+len(c.Key)+len(c.ClusterID))}
	e.byte(byte(cmdInit))
	e.fixed(c.Key[:])
	e.fixed(c.ClusterID[:])
	return seal(e.buf)
}

// Encode is the batch's log entry (Command), of the create type its
// Level picks, so that older builds apply the creates they can.
func (c CreateBatch) Encode() []byte {
	e := encoder{buf: make([]byte, 0, 16+len(c.Items)*128)}
	// The oldest type that carries the batch (see RequiredLevel): builds
	// before options apply creates without them, builds before imports
	// kept creation times and clicks apply creates without those.
	typ := cmdCreateKeyed
	switch c.Level() {
	case LevelOptions:
		typ = cmdCreateOptions
	case LevelImport:
		typ = cmdCreateImported
	case LevelVisitRows:
		typ = cmdCreateExtended
	}
	e.byte(byte(typ))
	e.varint(c.Now)
	e.uvarint(uint64(len(c.Items)))
	for _, it := range c.Items {
		e.string(it.RequestID)
		e.string(it.URL)
		e.string(it.Canonical)
		e.string(it.Workspace)
		e.string(it.CustomCode)
		e.byte(byte(it.Strategy))
		e.bool(it.Dedupe)
		e.varint(it.ExpiresAt)
		e.uvarint(uint64(it.CodeLength))
		e.string(it.KeyID)
		switch typ {
		case cmdCreateOptions, cmdCreateImported:
			e.string(it.Domain)
			encodeOptions(&e, it.Options)
		case cmdCreateExtended:
			e.string(it.Domain)
			encodeOptionsExtended(&e, it.Options)
		}
		if typ == cmdCreateImported || typ == cmdCreateExtended {
			e.varint(it.CreatedAt)
			e.uvarint(it.Clicks)
		}
	}
	return seal(e.buf)
}

// Encode is the edit's log entry (Command): cmdEditExtended, with the
// fields of LevelVisitRows after the others, when its Level is that.
func (c EditCommand) Encode() []byte {
	e := encoder{buf: make([]byte, 0, 128)}
	extended := c.Level() >= LevelVisitRows
	typ := cmdEdit
	if extended {
		typ = cmdEditExtended
	}
	e.byte(byte(typ))
	encodeEdit(&e, c)
	if extended {
		encodeEditExtension(&e, c)
	}
	return seal(e.buf)
}

// Encode is the domain's setting or removal as a log entry (Command):
// cmdDomainExtended, with the invalid-link redirect, when its Level is
// LevelVisitRows.
func (c DomainCommand) Encode() []byte {
	var e encoder
	extended := c.Level() >= LevelVisitRows
	typ := cmdDomain
	if extended {
		typ = cmdDomainExtended
	}
	e.byte(byte(typ))
	e.string(c.Domain.Name)
	e.string(c.Domain.RootRedirect)
	e.string(c.Domain.NotFoundRedirect)
	if extended {
		e.string(c.Domain.InvalidRedirect)
	}
	e.bool(c.Remove)
	e.string(c.By)
	e.varint(c.Now)
	return seal(e.buf)
}

// Encode is the visit's log entry (Command), with its visitor only when
// HasVisitor.
func (c VisitCommand) Encode() []byte {
	var e encoder
	typ := cmdVisit
	if c.HasVisitor {
		typ = cmdVisitVisitor
	}
	e.byte(byte(typ))
	e.string(c.Code)
	e.varint(c.Now)
	if c.HasVisitor {
		encodeVisitor(&e, &c.Visitor)
	}
	return seal(e.buf)
}

// EncodeOptions and DecodeOptions carry a link's Options where the log
// and snapshots do not: between nodes, in the same encoding. Options with
// a field of LevelVisitRows, which exist only once every server reads
// them, are followed by those fields (encodeOptionsExtended): a build
// before that level refuses them as trailing bytes rather than drop them.
func EncodeOptions(o *Options) []byte {
	var e encoder
	if o.extended() {
		encodeOptionsExtended(&e, o)
	} else {
		encodeOptions(&e, o)
	}
	return e.buf
}

// DecodeOptions reads what EncodeOptions wrote, nil for no options, and
// refuses trailing bytes.
func DecodeOptions(b []byte) (*Options, error) {
	d := decoder{buf: b}
	o := decodeOptions(&d)
	if o != nil && d.err == nil && len(d.buf) != 0 {
		o.Crawlable = d.bool()
		decodeRulesExtension(&d, o.Rules)
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.buf)))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode options: %w", d.err)
	}
	return o, nil
}

// Encode is the delete's log entry (Command), with the key that asked
// for it.
func (c DeleteCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdDeleteKeyed))
	e.string(c.Code)
	e.varint(c.Now)
	e.string(c.KeyID)
	return seal(e.buf)
}

// Encode is the batch's log entry (Command), with each count's visitor
// only when Visitors.
func (c ClickBatch) Encode() []byte {
	e := encoder{buf: make([]byte, 0, 32+len(c.Counts)*24)}
	typ := cmdClicks
	if c.Visitors {
		typ = cmdClicksVisitors
	}
	e.byte(byte(typ))
	e.string(c.Node)
	e.uvarint(c.Seq)
	e.varint(c.Now)
	e.uvarint(uint64(len(c.Counts)))
	for i := range c.Counts {
		cc := &c.Counts[i]
		e.string(cc.Code)
		e.uvarint(cc.Count)
		if c.Visitors {
			encodeVisitor(&e, &cc.Visitor)
		}
	}
	return seal(e.buf)
}

// Encode is the purge's log entry (Command).
func (c PurgeCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdPurge))
	e.varint(c.ExpiredBefore)
	e.varint(c.RequestsBefore)
	return seal(e.buf)
}

// Encode is the member's address as a log entry (Command).
func (c ServerCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdServer))
	e.string(c.ID)
	e.string(c.HTTPAddr)
	return seal(e.buf)
}

// Encode is the removal record as a log entry (Command).
func (c ServerRemovalCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdServerRemoval))
	e.string(c.ID)
	e.string(c.Incarnation)
	e.bool(c.Forget)
	return seal(e.buf)
}

// Encode is the key's creation as a log entry (Command), with the key's
// domains only when it is limited to some.
func (c KeyCreateCommand) Encode() []byte {
	e := encoder{buf: make([]byte, 0, 128)}
	typ := cmdKeyCreate
	switch { // older builds read keys without domains, or without authors
	case c.Key.OwnLinksOnly:
		typ = cmdKeyCreateOwn
	case len(c.Key.Domains) > 0:
		typ = cmdKeyCreateDomains
	}
	e.byte(byte(typ))
	encodeKey(&e, &c.Key)
	e.string(c.By)
	e.varint(c.Now)
	if typ != cmdKeyCreate {
		encodeStrings(&e, c.Key.Domains)
	}
	if typ == cmdKeyCreateOwn {
		e.bool(true)
	}
	return seal(e.buf)
}

func encodeStrings(e *encoder, list []string) {
	e.uvarint(uint64(len(list)))
	for _, s := range list {
		e.string(s)
	}
}

func decodeStrings(d *decoder) []string {
	n := d.count(1)
	var out []string
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, d.string())
	}
	return out
}

// encodeKey writes a key's fields as the key command and the snapshot both
// carry them; CreatedBy is the caller's (the command's By, or the
// snapshot's own field).
func encodeKey(e *encoder, k *APIKey) {
	e.string(k.ID)
	e.string(k.Name)
	e.fixed(k.Hash[:])
	e.byte(byte(k.Scopes))
	e.uvarint(uint64(len(k.Workspaces)))
	for _, w := range k.Workspaces {
		e.string(w)
	}
	e.varint(k.CreatedAt)
	e.varint(k.ExpiresAt)
}

// decodeKey reads what encodeKey wrote.
func decodeKey(d *decoder) *APIKey {
	k := &APIKey{ID: d.string(), Name: d.string()}
	d.fixed(k.Hash[:])
	k.Scopes = Scope(d.byte())
	n := d.count(1)
	// A snapshot is decoded as a stream, where counts are not bounded by
	// the input read so far: grow with what is read instead.
	k.Workspaces = make([]string, 0, min(n, 16))
	for i := 0; i < n && d.err == nil; i++ {
		k.Workspaces = append(k.Workspaces, d.string())
	}
	k.CreatedAt, k.ExpiresAt = d.varint(), d.varint()
	return k
}

// Encode is the revocation's log entry (Command).
func (c KeyRevokeCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdKeyRevoke))
	e.string(c.ID)
	e.string(c.By)
	e.varint(c.Now)
	return seal(e.buf)
}

func decodeInit(d *decoder) InitCommand {
	var c InitCommand
	d.fixed(c.Key[:])
	d.fixed(c.ClusterID[:])
	return c
}

// decodeDelete reads a delete: cmdDeleteKeyed's with the key that asked.
func decodeDelete(d *decoder, typ commandType) DeleteCommand {
	c := DeleteCommand{Code: d.string(), Now: d.varint()}
	if typ == cmdDeleteKeyed {
		c.KeyID = d.string()
	}
	return c
}

func decodePurge(d *decoder) PurgeCommand {
	return PurgeCommand{ExpiredBefore: d.varint(), RequestsBefore: d.varint()}
}

func decodeServer(d *decoder) ServerCommand {
	return ServerCommand{ID: d.string(), HTTPAddr: d.string()}
}

func decodeServerRemoval(d *decoder) ServerRemovalCommand {
	return ServerRemovalCommand{ID: d.string(), Incarnation: d.string(), Forget: d.bool()}
}

func decodeKeyRevoke(d *decoder) KeyRevokeCommand {
	return KeyRevokeCommand{ID: d.string(), By: d.string(), Now: d.varint()}
}

// decodeDomain reads a domain's setting: cmdDomainExtended's with the
// invalid-link redirect.
func decodeDomain(d *decoder, typ commandType) DomainCommand {
	dom := Domain{Name: d.string(), RootRedirect: d.string(), NotFoundRedirect: d.string()}
	if typ == cmdDomainExtended {
		dom.InvalidRedirect = d.string()
	}
	return DomainCommand{Domain: dom, Remove: d.bool(), By: d.string(), Now: d.varint()}
}

// decodeVisit reads a visit: cmdVisitVisitor's with its visitor.
func decodeVisit(d *decoder, typ commandType) VisitCommand {
	c := VisitCommand{Code: d.string(), Now: d.varint(), HasVisitor: typ == cmdVisitVisitor}
	if c.HasVisitor {
		c.Visitor = decodeVisitor(d)
	}
	return c
}

// init sets the key and the cluster's id unless an earlier init did.
func (s *state) init(c InitCommand) error {
	if !s.hasKey {
		s.hasKey, s.key, s.clusterID = true, c.Key, c.ClusterID
	}
	return nil
}

// serverTable is what the state knows of the cluster's servers: their
// HTTP addresses, for operators' views, and the servers an operator
// removed (removals.go).
type serverTable struct {
	addrs   map[string]string // server id → HTTP address
	removed map[string]string // server id → incarnation it was removed with
}

func newServerTable() serverTable {
	return serverTable{addrs: map[string]string{}, removed: map[string]string{}}
}

// set records or, with an empty address, forgets a server's HTTP address.
func (t *serverTable) set(c ServerCommand) error {
	if c.HTTPAddr == "" {
		delete(t.addrs, c.ID)
	} else {
		t.addrs[c.ID] = c.HTTPAddr
	}
	return nil
}

// minCreateItemSize is the smallest encoding of one CreateRequest: five empty
// strings, strategy, dedupe, expiry and length.
const minCreateItemSize = 9

func decodeCreate(d *decoder, typ commandType) CreateBatch {
	c := CreateBatch{Now: d.varint()}
	n := d.count(minCreateItemSize)
	c.Items = make([]CreateRequest, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		it := CreateRequest{
			RequestID:  d.string(),
			URL:        d.string(),
			Canonical:  d.string(),
			Workspace:  d.string(),
			CustomCode: d.string(),
			Strategy:   Strategy(d.byte()),
			Dedupe:     d.bool(),
			ExpiresAt:  d.varint(),
		}
		length := d.uvarint()
		if length > codes.MaxCounterLength {
			d.fail(fmt.Errorf("code length %d", length))
		}
		it.CodeLength = int(length)
		// Each create type is the one before it with more fields per item.
		if typ != cmdCreate {
			it.KeyID = d.string()
		}
		switch typ {
		case cmdCreateOptions, cmdCreateImported:
			it.Domain = d.string()
			it.Options = decodeOptions(d)
		case cmdCreateExtended:
			it.Domain = d.string()
			it.Options = decodeOptionsExtended(d)
		}
		if typ == cmdCreateImported || typ == cmdCreateExtended {
			it.CreatedAt = d.varint()
			it.Clicks = d.uvarint()
		}
		if it.Strategy > StrategyHash {
			d.fail(fmt.Errorf("unknown strategy %d", it.Strategy))
		}
		c.Items = append(c.Items, it)
	}
	return c
}

func decodeClicks(d *decoder, typ commandType) ClickBatch {
	c := ClickBatch{Node: d.string(), Seq: d.uvarint(), Now: d.varint(), Visitors: typ == cmdClicksVisitors}
	n := d.count(2)
	c.Counts = make([]ClickCount, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		cc := ClickCount{Code: d.string(), Count: d.uvarint()}
		if c.Visitors {
			cc.Visitor = decodeVisitor(d)
		}
		c.Counts = append(c.Counts, cc)
	}
	return c
}

// decodeKeyCreate reads a key's creation: cmdKeyCreateDomains's with the
// key's domains, cmdKeyCreateOwn's also with whether it sees only its links.
func decodeKeyCreate(d *decoder, typ commandType) KeyCreateCommand {
	c := KeyCreateCommand{Key: *decodeKey(d)}
	c.By, c.Now = d.string(), d.varint()
	if typ != cmdKeyCreate {
		c.Key.Domains = decodeStrings(d)
	}
	if typ == cmdKeyCreateOwn {
		c.Key.OwnLinksOnly = d.bool()
	}
	return c
}

// writeServers and readServers are the servers' HTTP addresses, by id.
func writeServers(snap *snapshot, e *encoder, _ byte, _ func(bool)) {
	e.uvarint(uint64(len(snap.servers)))
	for _, sv := range snap.servers {
		e.string(sv.id)
		e.string(sv.httpAddr)
	}
}

func readServers(st *state, d *decoder, _ byte) error {
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		st.servers.addrs[d.string()] = d.string()
	}
	return nil
}

type serverEntry struct{ id, httpAddr string }
