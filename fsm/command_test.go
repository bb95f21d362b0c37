package fsm

import (
	"bytes"
	"maps"
	"testing"
)

// everyCommand is one command of each entry type this build writes.
func everyCommand() map[string]Command {
	key := testAPIKey("aaaaaaaaaaaa", ScopeLinksRead, AllWorkspaces)
	limited := key
	limited.Domains = []string{"a.example"}
	own := limited
	own.OwnLinksOnly = true
	visitor := Visitor{Browser: 1, Country: [2]byte{'D', 'E'}}
	commands := map[string]Command{
		"init":                InitCommand{Key: testKey, ClusterID: [16]byte{1}},
		"create":              CreateBatch{Now: 1, Items: []CreateRequest{{URL: "https://example.com/", CodeLength: 7, KeyID: "k"}}},
		"create with options": CreateBatch{Now: 1, Items: []CreateRequest{{URL: "https://example.com/", Domain: "a.example"}}},
		"create imported":     CreateBatch{Now: 1, Items: []CreateRequest{{URL: "https://example.com/", CreatedAt: 5, Clicks: 3}}},
		"delete":              DeleteCommand{Code: "x", Now: 1, KeyID: "k"},
		"clicks":              ClickBatch{Node: "n1", Seq: 1, Now: 1, Counts: []ClickCount{{Code: "x", Count: 2}}},
		"clicks with visitors": ClickBatch{Node: "n1", Seq: 1, Now: 1, Visitors: true,
			Counts: []ClickCount{{Code: "x", Count: 2, Visitor: visitor}}},
		"purge":                PurgeCommand{ExpiredBefore: 1, RequestsBefore: 2},
		"server":               ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:8080"},
		"key":                  KeyCreateCommand{Key: key, By: RootKeyID, Now: 1},
		"key with domains":     KeyCreateCommand{Key: limited, By: RootKeyID, Now: 1},
		"key of its own links": KeyCreateCommand{Key: own, By: RootKeyID, Now: 1},
		"key revoke":           KeyRevokeCommand{ID: "aaaaaaaaaaaa", By: RootKeyID, Now: 1},
		"edit":                 EditCommand{Code: "x", Now: 1, Fields: EditTitle, Title: "t"},
		"domain":               DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID, Now: 1},
		"visit":                VisitCommand{Code: "x", Now: 1},
		"visit with visitor":   VisitCommand{Code: "x", Now: 1, HasVisitor: true, Visitor: visitor},
		"webhook set":          WebhookSetCommand{Webhook: Webhook{ID: "w", URL: "https://example.com/h", Events: EventTypes(0).With(EventLinkCreated), Secret: "s"}, By: RootKeyID, Now: 1},
		"webhook delete":       WebhookDeleteCommand{ID: "w", By: RootKeyID, Now: 1},
		"webhook ack":          WebhookAckCommand{ID: "w", Seq: 3},
		"raise":                RaiseCommand{To: LevelBounds},
		"audit note":           AuditNoteCommand{Entry: AuditEntry{At: 1, KeyID: RootKeyID, Action: AuditMemberJoin, Subject: "n4"}},
		"acme account":         CertCommand{Kind: SetACMEAccount, Account: ACMEAccount{Directory: "https://ca.example/dir", URL: "https://ca.example/acct/1", Key: "sealed"}},
		"certificate":          CertCommand{Kind: SetCertificate, Certificate: Certificate{Name: "s.example", Chain: "pem", Key: "sealed", NotBefore: 1, NotAfter: 2}},
		"challenge":            CertCommand{Kind: SetChallenge, Challenge: Challenge{Token: "t", KeyAuth: "t.x", Expires: 5}},
		"order":                CertCommand{Kind: SetOrder, Order: Order{Name: "s.example", URL: "https://ca.example/order/1", Started: 1}},
		"visits delete":        VisitsDeleteCommand{Code: "abc", Now: 9, KeyID: key.ID},
		"orphan visits delete": OrphanVisitsDeleteCommand{Now: 9, KeyID: key.ID},
		"server removal":       ServerRemovalCommand{ID: "n4", Incarnation: "0123456789abcdef"},
		"rename":               RenameCommand{NewCode: "y", Edit: EditCommand{Code: "x", Now: 1, Fields: EditTitle | EditCrawlable, Title: "t", Crawlable: true}},
	}
	maps.Copy(commands, visitRowsCommands())
	return commands
}

// TestCommandLevels: each command's Level is the level of the entry it
// encodes, it decodes back into the same entry, and a downgrade needs a
// lower level. Every entry type this build writes has a case, so a new
// command cannot skip the rules.
func TestCommandLevels(t *testing.T) {
	written := map[commandType]bool{}
	for name, cmd := range everyCommand() {
		entry := cmd.Encode()
		written[commandType(entry[0]&^sealedFlag)] = true
		if got, want := cmd.Level(), RequiredLevel(entry); got != want {
			t.Errorf("%s: Level %d, its entry needs %d", name, got, want)
		}
		back, err := DecodeCommand(entry)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !bytes.Equal(back.Encode(), entry) {
			t.Errorf("%s: %T does not round-trip", name, back)
		}
		if d, ok := cmd.(Downgrader); ok {
			lower := d.Downgrade()
			dropsVisitors := cmd.Level() < LevelVisits || lower.Level() < LevelVisits
			if lower.Level() > cmd.Level() || !dropsVisitors || RequiredLevel(lower.Encode()) != lower.Level() {
				t.Errorf("%s: downgrade to level %d from %d", name, lower.Level(), cmd.Level())
			}
		}
	}
	// cmdCreate and cmdDelete are only read: logs of builds before keys.
	for typ := cmdInit; typ <= cmdKeyCreateOwn; typ++ {
		if !written[typ] && typ != cmdCreate && typ != cmdDelete {
			t.Errorf("entry type %d has no command in everyCommand", typ)
		}
	}
}
