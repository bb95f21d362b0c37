package fsm

// Entry levels name what a build understands of what other nodes send it:
// the sets of log entry types it applies and, from LevelWire on, the
// encodings it reads in node-to-node messages. A cluster upgraded one node
// at a time holds old and new builds at once; a node of an older build
// cannot apply an entry type it does not know and would diverge from the
// others. So a node reports its level, and nobody proposes an entry, or
// sends a message, above the lowest level of the cluster's servers (the
// cluster package decides).
const (
	// LevelKeys: types 1–10, what the release that brought API keys
	// applies.
	LevelKeys = 1
	// LevelOptions: also types 11–15 (link options, edits, domains,
	// visits to limited links, keys limited to domains).
	LevelOptions = 2
	// LevelVisits: also types 16–20 (clicks with their visitors,
	// webhooks).
	LevelVisits = 3
	// LevelImport: also type 21 (creates that carry the creation time and
	// click total an import read from another shortener's export).
	LevelImport = 4
	// LevelWire: no new entry type. A build at this level also reads the
	// creates a follower relays to the leader as one sealed CreateBatch
	// entry (the log's own encoding), and links in EncodeLink's, so that a
	// field a create or a link gains reaches the other node. Nothing
	// proposes an entry of this level: RequiredLevel never returns it.
	LevelWire = 5
	// LevelRestoreAudit: no new entry type either. A build at this level
	// reads snapshots of version 7, whose audit log may record restores
	// (AuditBackupRestore), which older builds refuse as an unknown
	// action. A leader installs a restore only while every server reports
	// it; RequiredLevel never returns it.
	LevelRestoreAudit = 6
	// LevelBounds: types 22 and 23 (raising the cluster to a level, and
	// audit notes of membership changes). Once the leader raises the
	// cluster to it, Apply bounds what clients grow and keeps the security
	// audit apart (raise.go); snapshots of such a state are version 8.
	LevelBounds = 7
	// LevelCerts: type 24 (the certificates the cluster serves, its ACME
	// account, challenges and orders: certs.go), applied once the cluster
	// is raised to it; snapshots of such a state are version 9.
	LevelCerts = 8
	// LevelVisitRows: what the other shorteners' APIs need of the state
	// (types 25 and up: deleting a link's visits, renaming and deleting
	// tags, links' crawlable flag and the rule conditions on browser and
	// address, domains' redirect for invalid links), and, once the cluster
	// is raised to it, click batches that also keep joint visitor tallies
	// per link and hour; snapshots of such a state are version 10.
	LevelVisitRows = 9
	// LevelRemovals: type 31, the record of a server an operator removed
	// (its id and the incarnation of its data dir), which every leader
	// reads before it adds a server (removals.go), applied once the
	// cluster is raised to it; snapshots of such a state are version 11.
	LevelRemovals = 10
	// LevelRename: type 32, renaming a link's code (rename.go), applied
	// once the cluster is raised to it; from it on, a create's request
	// record names its link by the qualified code, so a retry in a
	// registered domain finds it (state.go). No new snapshot section: the
	// renamed link and its retired code are in the links and tombstones
	// every version holds, so snapshots of such a state are version 11.
	LevelRename = 11
	// LevelTargets: once the cluster is raised to it, a dedupe create
	// returns the oldest live link of its target that still redirects,
	// whatever made that link (dedupe.go); before, only a link made with
	// dedupe. A link's, a rule's or a domain redirect's target may be
	// mailto:, tel: or an app's scheme (those SchemeRefusal does not
	// refuse, target.go), which older builds refuse. A link records the
	// key that created it (its author, authors.go), and type 33 makes keys
	// limited to the links they created: no older build keeps authors, so
	// none is recorded before every server is of this build and the
	// cluster was raised. Snapshots of such a state are version 12: the
	// authors after the keys.
	LevelTargets = 12
	// LevelDisabled: no new entry type. Once the cluster is raised to it,
	// a create or an edit that sets an expiry at or before its entry's own
	// time (Now) makes the link disabled on purpose (a record flag), as
	// Shlink's past validUntil does, and the purge of expired links skips
	// it until an edit sets a later expiry or none. Before, every build
	// purges such a link a retention after its expiry, as any other.
	// Snapshots of such a state are version 13: the flag among the links'.
	LevelDisabled = 13
	// LevelCheckpoints: no new entry type. A build at this level installs
	// a snapshot sent as its checkpoint's files (snapfiles.go), which a
	// leader sends only while every server reports it, the snapshot
	// stream otherwise; RequiredLevel never returns it.
	LevelCheckpoints = 14
	// LevelRequests: no new entry type. Once the cluster is raised to it,
	// a purge that drops an idempotency record forgets its request id
	// only when that record is the id's latest (a create resent after its
	// link was deleted records the id again); before, it forgot the id
	// altogether, which a node that rebuilt its index from the records
	// (a restore, a restart) did not, and that node answered a later
	// resend with the newer record's link where the others made another
	// (requests.go). RequiredLevel never returns it.
	LevelRequests = 15
	// LevelPositions: no new entry type. A build at this level reads a
	// record position past 32 bits (positions.go); once the cluster is
	// raised to it, creates go on past MaxRecords links, which they were
	// refused before (recordTable.spent). RequiredLevel never returns it.
	LevelPositions = 16
	// LevelOptionIndexes: no new entry type. A build at this level keeps the
	// crawlable and tag indexes (crawlable.go, tagindex.go) in its engine
	// and marks the state files of its checkpoints with layout 4, which
	// builds before it refuse: a leader sends a checkpoint's files only
	// while every server reports it (FilesLevel). RequiredLevel never
	// returns it.
	LevelOptionIndexes = 17
	// EntryLevel is the level of this build.
	EntryLevel = LevelOptionIndexes
	// FilesLevel is the level of the builds that read the checkpoint files
	// this build sends (snapfiles.go).
	FilesLevel = LevelOptionIndexes
)

// RequiredLevel is the entry level a node must apply to apply entry. The
// encoders choose the oldest type that carries a command, so a create
// without options or domain, or a key without domains, stays at
// LevelKeys.
func RequiredLevel(entry []byte) int {
	if len(entry) == 0 {
		return LevelKeys
	}
	switch typ := commandType(entry[0] &^ sealedFlag); {
	case typ >= cmdKeyCreateOwn:
		return LevelTargets
	case typ >= cmdRename:
		return LevelRename
	case typ >= cmdServerRemoval:
		return LevelRemovals
	case typ >= cmdVisitsDelete:
		return LevelVisitRows
	case typ >= cmdCert:
		return LevelCerts
	case typ >= cmdRaise:
		return LevelBounds
	case typ >= cmdCreateImported:
		return LevelImport
	case typ >= cmdClicksVisitors:
		return LevelVisits
	case typ >= cmdCreateOptions:
		return LevelOptions
	}
	return LevelKeys
}

// The level each command needs: the level of the entry type Encode picks
// for it (command.go). TestCommandLevels holds each to RequiredLevel of
// its own entry.

// Level is LevelKeys: every build applies inits (Command).
func (InitCommand) Level() int { return LevelKeys }

// Level is LevelKeys: deletes with their key came with API keys (Command).
func (DeleteCommand) Level() int { return LevelKeys }

// Level is LevelKeys: every build applies purges (Command).
func (PurgeCommand) Level() int { return LevelKeys }

// Level is LevelKeys: every build applies members' addresses (Command).
func (ServerCommand) Level() int { return LevelKeys }

// Level is LevelRemovals, the level that brought removal records
// (Command).
func (ServerRemovalCommand) Level() int { return LevelRemovals }

// Level is LevelKeys: revocations came with API keys (Command).
func (KeyRevokeCommand) Level() int { return LevelKeys }

// Level is LevelVisitRows for an edit of the crawlable flag or to rules
// with a browser or address, LevelOptions for any other (Command).
func (c EditCommand) Level() int {
	if c.Fields&EditCrawlable != 0 || c.Fields&EditRules != 0 && rulesExtended(c.Rules) {
		return LevelVisitRows
	}
	return LevelOptions
}

// Level is LevelVisits, the level that brought webhooks (Command).
func (WebhookSetCommand) Level() int { return LevelVisits }

// Level is LevelVisits, the level that brought webhooks (Command).
func (WebhookDeleteCommand) Level() int { return LevelVisits }

// Level is LevelVisits, the level that brought webhooks (Command).
func (WebhookAckCommand) Level() int { return LevelVisits }

// Level is LevelTargets for a key limited to its own links, LevelOptions
// for one limited to domains.
func (c KeyCreateCommand) Level() int {
	if c.Key.OwnLinksOnly {
		return LevelTargets
	}
	if len(c.Key.Domains) > 0 {
		return LevelOptions
	}
	return LevelKeys
}

// Level is the highest of its creates'.
func (c CreateBatch) Level() int {
	level := LevelKeys
	for i := range c.Items {
		level = max(level, c.Items[i].Level())
	}
	return level
}

// Level is LevelVisits for a visit with its visitor.
func (c VisitCommand) Level() int {
	if c.HasVisitor {
		return LevelVisits
	}
	return LevelOptions
}

// Downgrade is the visit without its visitor: it still counts towards
// the link's limit.
func (c VisitCommand) Downgrade() Command {
	c.HasVisitor, c.Visitor = false, Visitor{}
	return c
}

// Level is LevelVisits for a batch with its visitors.
func (c ClickBatch) Level() int {
	if c.Visitors {
		return LevelVisits
	}
	return LevelKeys
}

// Downgrade is the batch without visitors (WithoutVisitors).
func (c ClickBatch) Downgrade() Command { return c.WithoutVisitors() }

// Level is the entry level a create needs: LevelVisitRows for one whose
// options have a field of that level, LevelImport for one that
// brings a creation time or clicks, LevelOptions for one in a domain or
// with options, LevelKeys for any other.
func (r *CreateRequest) Level() int {
	if r.Options.extended() {
		return LevelVisitRows
	}
	if r.CreatedAt != 0 || r.Clicks != 0 {
		return LevelImport
	}
	if r.Domain != "" || !r.Options.empty() {
		return LevelOptions
	}
	return LevelKeys
}

// Level is the entry level the state needs of a node that is to hold it:
// LevelOptions once any link has options, a domain is registered or a key
// is limited to domains; LevelVisits once a link has visitors or a webhook
// exists; LevelRestoreAudit while the audit log holds a restore;
// the level the cluster was raised to, from LevelBounds on. Imported
// creation times and clicks need no level of their own: every build holds
// a link's creation time and click total.
func (f *FSM) Level() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.level()
}

func (s *state) level() int {
	if s.bounded() {
		return s.raised
	}
	if s.audit.holdsRestore() {
		return LevelRestoreAudit
	}
	if s.hooks.active() || s.visits.active() {
		return LevelVisits
	}
	if s.opts.len() > 0 || len(s.domains) > 0 {
		return LevelOptions
	}
	for _, k := range s.keys {
		if len(k.Domains) > 0 {
			return LevelOptions
		}
	}
	return LevelKeys
}
