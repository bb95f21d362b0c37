package main

// mutations are the bugs mutate writes, one at a time. Each breaks one
// guarantee of docs/RELIABILITY.md in the way a careless change would;
// its guard is the test that docs/RELIABILITY.md (or the test's own
// comment) says stands in the way. When the code an entry changes moves,
// the entry is reported stale and must follow it.
var mutations = []mutation{
	// The state machine: what every node applies alike.
	{
		name:      "visit-limit",
		guarantee: "a link with max_visits is never redirected more often than that",
		file:      "fsm/edit.go",
		from:      "s.visitsUsed(p) >= o.MaxVisits",
		to:        "s.visitsUsed(p) > o.MaxVisits",
		pkg:       "./fsm/", run: "^TestEditKeepsHistoryAndOptions$",
	},
	{
		name:      "tombstone",
		guarantee: "codes are never reused",
		file:      "fsm/state.go",
		from:      "\ts.byCode.remove(s.codeHash(code), p)\n\ts.tombstones[code] = struct{}{}\n",
		to:        "\ts.byCode.remove(s.codeHash(code), p)\n",
		pkg:       "./fsm/", run: "^TestCreateRules$",
	},
	{
		name:      "custom-code-taken",
		guarantee: "at most one winner per custom code",
		file:      "fsm/state.go",
		from:      "if s.taken(q) {",
		to:        "if false && s.taken(q) {",
		pkg:       "./fsm/", run: "^TestCreateRules$",
	},
	{
		name:      "dedupe",
		guarantee: "dedupe returns one code per URL and workspace",
		file:      "fsm/state.go",
		from:      "if !ok || !dedupe || !known {",
		to:        "if !ok || !known {",
		pkg:       "./fsm/", run: "^TestCreateRules$",
	},
	{
		name:      "idempotent-create",
		guarantee: "a resent create returns its first outcome",
		file:      "fsm/state.go",
		from:      "if p, ok := s.lookup(rec.code); ok {",
		to:        "if p, ok := s.lookup(rec.code); ok && rec.existing {",
		pkg:       "./fsm/", run: "^TestRequestIDMakesCreateIdempotent$",
	},
	{
		name:      "clicks-once",
		guarantee: "clicks are counted exactly once",
		file:      "fsm/state.go",
		from:      "if c.Seq <= s.clickSeqs[c.Node] {",
		to:        "if c.Seq < s.clickSeqs[c.Node] {",
		pkg:       "./fsm/", run: "^TestClickBatchesApplyOnce$",
	},
	{
		name:      "revoked-key-writes",
		guarantee: "no write made with a revoked or expired key is applied, whichever node relays it",
		file:      "fsm/keys.go",
		from:      "return ok && k.Allows(ScopeLinksWrite, workspace, now) && k.SeesDomain(domain)",
		to:        "return ok && k.SeesDomain(domain)",
		pkg:       "./fsm/", run: "^TestStateChecksTheWritingKey$",
	},
	{
		name:      "entry-checksum",
		guarantee: "a damaged stored entry stops the node with a clear error, never with wrong answers",
		file:      "fsm/command.go",
		from:      "return body, crc32.Checksum(body, crcTable) == binary.BigEndian.Uint32(sum)",
		to:        "return body, len(sum) == sealedBytes",
		pkg:       "./fsm/", run: "^TestSealedCommandsRefuseAnyChangedBit$",
	},
	{
		name:      "snapshot-checksum",
		guarantee: "a damaged snapshot stops the node with a clear error, never with wrong answers",
		file:      "fsm/snapshot.go",
		from:      "case binary.BigEndian.Uint32(sum) != d.sum.Sum32():",
		to:        "case binary.BigEndian.Uint32(sum) != d.sum.Sum32() && false:",
		pkg:       "./fsm/", run: "^TestSnapshotRejectsCorruption$",
	},

	// The cluster: Raft, its transport and the leader's duties.
	{
		name:      "checked-transport",
		guarantee: "an answer from another server than the one Raft asked never counts as that server's",
		file:      "cluster/transport.go",
		from:      "if len(header.ID) == 0 || raft.ServerID(header.ID) == id {",
		to:        "if len(header.ID) >= 0 {",
		pkg:       "./cluster/", run: "^TestCheckedTransportCountsOnlyTheServerAsked$",
	},
	{
		name:      "backup-mac",
		guarantee: "a restore takes only a backup the cluster key authenticates, or one checked record by record",
		file:      "cluster/backup.go",
		from:      "authentic := hmac.Equal(mac.Sum(nil), sum)",
		to:        "authentic := hmac.Equal(mac.Sum(nil), sum) || len(sum) > 0",
		pkg:       "./cluster/", run: "^TestRestoreRefusesAnEditedBackup$",
	},
	{
		name:      "store-check",
		guarantee: "a damaged raft.db stops that node with a clear error, never with wrong answers",
		file:      "cluster/storecheck.go",
		from:      "\tif _, err := fsm.DecodeCommand(entry.Data); err != nil {\n\t\treturn false, fmt.Errorf(\"%w: log entry %d: %v\", ErrDamagedStore, i, err)\n\t}\n",
		to:        "",
		pkg:       "./e2e/", run: "^TestDamagedRaftStoreIsRefusedAndReplaced$",
	},
	{
		name:      "removed-stays-removed",
		guarantee: "a removed server stays out of the configuration, under every later leader",
		file:      "cluster/reconcile.go",
		from:      "if m.Leaving || n.gossip.wasRemoved(m) || n.keepsOut(m) {",
		to:        "if m.Leaving || n.gossip.wasRemoved(m) {",
		pkg:       "./cluster/", run: "^TestRemovedServerStaysOutUnderEveryLeader$",
	},
	{
		name:      "removed-stays-removed-e2e",
		guarantee: "a removed server stays out of the configuration, under every later leader",
		file:      "cluster/reconcile.go",
		from:      "if m.Leaving || n.gossip.wasRemoved(m) || n.keepsOut(m) {",
		to:        "if m.Leaving || n.gossip.wasRemoved(m) {",
		pkg:       "./e2e/", run: "^TestRemovedRunningServerStaysRemoved$",
	},
	{
		// Two waits make a delete visible before its 204, each enough
		// alone while the voters answer: the leader's for the voters, and
		// the forwarding node's for the leader's index. Either alone is
		// an equivalent mutant; the bug is a build without both.
		name:      "delete-visible-on-follower",
		guarantee: "after a 204 delete, every node that reaches the leader answers 404",
		file:      "cluster/forward.go",
		from:      "\t\terr = awaitLeaderIndex(ctx, n.machine, resp)\n",
		to:        "",
		also:      []edit{{"cluster/propose.go", "\tif opts.Visible {\n\t\tn.awaitServers(index)\n\t}\n", ""}},
		pkg:       "./e2e/faults/", run: "^TestDeleteThroughFollowerThenRead$",
	},
	{
		name:      "webhook-signature",
		guarantee: "webhook events are delivered signed",
		file:      "cluster/webhooks/event.go",
		from:      "\tmac.Write(body)\n",
		to:        "",
		pkg:       "./cluster/webhooks/", run: "^TestDeliversInOrderSigned$",
	},

	{
		name:      "fit-level",
		guarantee: "during a rolling upgrade no write is proposed that some server's build cannot apply",
		file:      "cluster/propose.go",
		from:      "err := n.levels.require(ctx, cmd.Level())",
		to:        "var err error",
		pkg:       "./cluster/", run: "^TestProposeWritesOnlyWhatEveryServerApplies$",
	},
	{
		name:      "fit-level-clicks",
		guarantee: "during a rolling upgrade no click batch is proposed that some server's build cannot apply",
		file:      "cluster/clicks.go",
		from:      "cmd, err := n.Fit(ctx, b)",
		to:        "cmd, err := fsm.Command(b), error(nil)",
		pkg:       "./cluster/", run: "^TestProposeWritesOnlyWhatEveryServerApplies$",
	},
	{
		name:      "promoter-lag",
		guarantee: "a joining node becomes a voter only once it is caught up",
		file:      "cluster/learners.go",
		from:      "if !learners[s.ID] || !ok || lagOf(leader, index) > promoteMaxLag {",
		to:        "if !learners[s.ID] || !ok {",
		pkg:       "./e2e/", run: "^TestJoinAnswersBeforeTheState$",
	},
	{
		name:      "serve-before-gossip",
		guarantee: "a node answers peers on its cluster port only once what they ask about is in place",
		file:      "cluster/node.go",
		from:      "\t\treturn nil, err\n\t}\n\t// Gossip is in place before",
		to:        "\t\treturn nil, err\n\t}\n\tn.start()\n\t// Gossip is in place before",
		also:      []edit{{"cluster/node.go", "\tn.start()\n\tif cfg.GossipAddr != \"\" {", "\tif cfg.GossipAddr != \"\" {"}},
		pkg:       "./cluster/", run: "^TestNodeInfoWhileTheNodeOpens$", race: true,
	},
	{
		name:      "foreign-restore",
		guarantee: "a restore takes a backup another cluster made only when asked to (--foreign)",
		file:      "cluster/backup.go",
		from:      "\tcase foreign:",
		to:        "\tcase true:",
		pkg:       "./cluster/", run: "^(TestRestoreRefusesAnEditedBackup|TestRestoreOfAnotherCluster|TestForeignRestoreChecksEveryRecord)$",
	},

	{
		name:      "key-file-mode",
		guarantee: "files a node trusts are its own: a cluster key file others may read is refused",
		file:      "cluster/secure/owner_unix.go",
		from:      "mode&0o077 != 0 {",
		to:        "mode&0o077 == 0o077 {",
		pkg:       "./cluster/secure/", run: "^TestKeyFileMustBeTheProcesssOwn$",
	},
	{
		name:      "data-dir-owner",
		guarantee: "files a node trusts are its own: a data dir another user owns is refused",
		file:      "cluster/datadir_unix.go",
		from:      "if !ok || st.Uid == 0 || int(st.Uid) == os.Geteuid() {",
		to:        "if !ok || st.Uid == 0 || int(st.Uid) != -1 {",
		pkg:       "./cluster/", run: "^TestDataDirOfAnotherUserIsRefused$",
	},

	// The HTTP API: who may do what.
	{
		name:      "delete-scope",
		guarantee: "who may do what: every route answers each kind of credential as docs/API.md says",
		file:      "httpd/server.go",
		from:      `s.require(fsm.ScopeLinksWrite, s.forwarder(s.handleDelete, forwardWrite))`,
		to:        `s.require(fsm.ScopeLinksRead, s.forwarder(s.handleDelete, forwardWrite))`,
		pkg:       "./httpd/", run: "^TestAuthorizationMatrix$",
	},
	{
		name:      "hash-budget-per-client",
		guarantee: "work done for others is bounded: no one client holds the others' link-password hashing up",
		file:      "httpd/hashing.go",
		from:      "perClient: budget{clientHashesPerMinute, clientHashBurst},",
		to:        "perClient: budget{},",
		pkg:       "./httpd/", run: "^TestDefaultHashLimitsBoundEachClientAndKey$",
	},
	{
		name:      "hash-budget-per-key",
		guarantee: "work done for others is bounded: a key used from many addresses has one hashing budget",
		file:      "httpd/hashing.go",
		from:      "perKey:    budget{keyHashesPerMinute, keyHashBurst},",
		to:        "perKey:    budget{},",
		pkg:       "./httpd/", run: "^TestDefaultHashLimitsBoundEachClientAndKey$",
	},
	{
		name:      "tags-read-after-write",
		guarantee: "read-after-write: a write acknowledged through any node shows in the next tag list of every node",
		file:      "httpd/edit.go",
		from:      "\ts.catchUpForList(ctx)\n\tworkspaces := visibleWorkspaces(ctx)\n\ttags :=",
		to:        "\tworkspaces := visibleWorkspaces(ctx)\n\ttags :=",
		pkg:       "./e2e/", run: "^TestListIsReadAfterWrite$",
	},
	{
		name:      "list-read-after-write",
		guarantee: "read-after-write: a write acknowledged through any node shows in the next link list of every node",
		file:      "httpd/links.go",
		from:      "\ts.catchUpForList(ctx)\n",
		to:        "",
		pkg:       "./e2e/", run: "^TestListIsReadAfterWrite$",
	},

	// The compatible APIs: what their clients rely on.
	{
		name:      "shlink-one-tag",
		guarantee: "a Shlink list filtered by one tag lists only that tag's links",
		file:      "httpd/compat/shlink.go",
		from:      "if len(q.tags) == 1 {",
		to:        "if len(q.tags) > 1 {",
		pkg:       "./httpd/", run: "^TestShlinkListFiltersTags$",
	},

	// Certificates: what the leader orders from the ACME CA.
	{
		name:      "acme-unknown-sni",
		guarantee: "the leader orders certificates only for the names it is given: a client's SNI name never starts an order",
		file:      "cluster/certs/source.go",
		from:      "type parsedCert struct {",
		to:        "var asked sync.Map\n\ntype parsedCert struct {",
		also: []edit{
			{"cluster/certs/source.go", "\t\treturn nil, fmt.Errorf(\"no certificate for %q\", name)", "\t\tasked.Store(name, true)\n\t\treturn nil, fmt.Errorf(\"no certificate for %q\", name)"},
			{"cluster/certs/manager.go", "\tfor _, name := range m.cfg.Names() {",
				"\tvar seen []string\n\tasked.Range(func(k, _ any) bool { seen = append(seen, k.(string)); return true })\n\tfor _, name := range append(m.cfg.Names(), seen...) {"},
		},
		pkg: "./e2e/", run: "^TestHTTPSWithACME$",
	},
}
