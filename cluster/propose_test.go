package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// TestProposeWritesOnlyWhatEveryServerApplies: while a server of an older
// build is in the configuration, a write it could not apply is refused
// (ErrUpgrading) and leaves the state as it was, a write that has a
// downgrade is written as the downgrade (clicks counted the way the older
// build counts them: bots left out, no visitors kept), on the Propose path
// and on the click path alike; once that server reports the newer level,
// the same writes go through whole.
func TestProposeWritesOnlyWhatEveryServerApplies(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	waitFor(t, n.leadership.ready)
	l := createURL(t, n, "https://example.com/visited")
	crawler := fsm.Visitor{Country: [2]byte{'D', 'E'}, Bot: fsm.Crawler}
	hook := func(id string) fsm.WebhookSetCommand {
		return fsm.WebhookSetCommand{
			Webhook: fsm.Webhook{ID: id, URL: "https://hooks.example.com/in", Events: fsm.EventTypes(0).With(fsm.EventLinkCreated), Secret: "0123456789abcdef0123456789abcdef"},
			By:      fsm.RootKeyID, Now: time.Now().UnixMilli(),
		}
	}
	// clicks is what a user sees of l's clicks: the total, and the crawler
	// visits kept apart from it.
	clicks := func() (total, crawlers uint64) {
		got, ok := n.FSM().Get(l.Code)
		if !ok {
			t.Fatalf("link %s is gone", l.Code)
		}
		crawlers, _ = n.FSM().BotsInAll(l.Code)
		return got.Clicks, crawlers
	}

	// A server of a build from before webhooks and visitors joins (as a
	// non-voter that never answers, so this node still commits alone).
	if err := n.raft.AddNonvoter("old", "127.0.0.1:1", 0, time.Second).Error(); err != nil {
		t.Fatalf("add a non-voter: %v", err)
	}
	n.levels.heard("old", fsm.LevelOptions)

	_, err := n.Propose(context.Background(), hook("hookbeforeupgrad"), ProposeOptions{})
	if !errors.Is(err, ErrUpgrading) {
		t.Errorf("a webhook proposed while a server cannot apply webhooks: err %v, want ErrUpgrading", err)
	}
	if ids := hookIDs(n); len(ids) != 0 {
		t.Errorf("a refused webhook was stored: %v", ids)
	}

	visit := fsm.VisitCommand{Code: l.Code, Now: time.Now().UnixMilli(), HasVisitor: true, Visitor: crawler}
	if _, err := n.Propose(context.Background(), visit, ProposeOptions{}); err != nil {
		t.Fatalf("a visit proposed while a server cannot keep visitors: %v", err)
	}
	if total, crawlers := clicks(); total != 1 || crawlers != 0 {
		t.Errorf("a crawler's visit during the upgrade left %d clicks and %d crawler visits; want it counted as the older build counts it: 1 click, 0 crawler visits", total, crawlers)
	}

	// The click path: a batch with a person's click and a crawler's.
	batch := fsm.ClickBatch{Node: "n9", Seq: 1, Now: time.Now().UnixMilli(), Visitors: true, Counts: []fsm.ClickCount{
		{Code: l.Code, Count: 1, Visitor: fsm.Visitor{Country: [2]byte{'F', 'R'}}},
		{Code: l.Code, Count: 1, Visitor: crawler},
	}}
	if err := (clickSender{n}).Send(context.Background(), batch); err != nil {
		t.Fatalf("a click batch sent while a server cannot keep visitors: %v", err)
	}
	if total, crawlers := clicks(); total != 2 || crawlers != 0 {
		t.Errorf("a batch of a click and a crawler's visit during the upgrade left %d clicks and %d crawler visits; want 2 clicks and still 0 crawler visits", total, crawlers)
	}

	// The server is upgraded and says so: the writes go through whole.
	n.levels.heard("old", fsm.LevelVisits)
	if _, err := n.Propose(context.Background(), hook("hookafterupgrade"), ProposeOptions{}); err != nil {
		t.Fatalf("a webhook proposed once every server applies webhooks: %v", err)
	}
	if ids := hookIDs(n); len(ids) != 1 || ids[0] != "hookafterupgrade" {
		t.Errorf("webhooks after the upgrade: %v, want only the one proposed then", ids)
	}
	visit.Now = time.Now().UnixMilli()
	if _, err := n.Propose(context.Background(), visit, ProposeOptions{}); err != nil {
		t.Fatalf("a visit proposed once every server keeps visitors: %v", err)
	}
	batch.Seq = 2
	if err := (clickSender{n}).Send(context.Background(), batch); err != nil {
		t.Fatalf("a click batch sent once every server keeps visitors: %v", err)
	}
	if total, crawlers := clicks(); total != 3 || crawlers != 2 {
		t.Errorf("after the upgrade, a crawler's visit and a batch of a click and a crawler's visit left %d clicks and %d crawler visits; want 3 clicks and 2 crawler visits", total, crawlers)
	}
}

// hookIDs are the ids of the webhooks n's state holds: what a listing
// shows, without their secrets.
func hookIDs(n *Node) []string {
	var ids []string
	for _, h := range n.FSM().Webhooks() {
		ids = append(ids, h.Webhook.ID)
	}
	return ids
}
