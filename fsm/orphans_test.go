package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func TestOrphanCode(t *testing.T) {
	for kind := range orphanKinds {
		for _, domain := range []string{"", "a.example", "x-1.example.org"} {
			code := OrphanCode(kind, domain)
			k, d, ok := orphanOf(code)
			if !ok || k != kind || d != domain {
				t.Errorf("orphanOf(OrphanCode(%s, %q)) = %s, %q, %v", kind, domain, k, d, ok)
			}
			if name, _ := ParseOrphanKind(kind.String()); name != kind {
				t.Errorf("ParseOrphanKind(%q) = %s", kind.String(), name)
			}
		}
	}
	// What a link's code can be is never an orphan visit's, and a
	// malformed orphan code is nothing.
	for _, code := range []string{"", "/", "abc", "a.example/abc", "/x", "/bA.EXAMPLE", "/b/x", "/ia b", "b/"} {
		if _, _, ok := orphanOf(code); ok {
			t.Errorf("orphanOf(%q) reads an orphan visit", code)
		}
	}
	if _, ok := ParseOrphanKind("base"); ok {
		t.Error("ParseOrphanKind accepts an unknown name")
	}
}

// orphaned is a state raised to LevelVisitRows with a registered domain
// and orphan visits of every kind on two days, from two nodes: 3 base URL
// visits (one a bot's) and 2 invalid codes on the default domain, 4 not
// found on a.example.
func orphaned(t testing.TB) *FSM {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelVisitRows}.Encode(),
		DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID, Now: 1}.Encode())
	applyFrom(f, 10,
		visitorsAt("n1", 1, talliesDay+3*hour,
			ClickCount{Code: OrphanCode(OrphanBaseURL, ""), Count: 2, Visitor: chromeDE},
			ClickCount{Code: OrphanCode(OrphanBaseURL, ""), Count: 1, Visitor: slackbot},
			ClickCount{Code: OrphanCode(OrphanRegular404, "a.example"), Count: 3, Visitor: safariUS}),
		visitorsAt("n2", 1, talliesDay+dayMillis+5*hour,
			ClickCount{Code: OrphanCode(OrphanInvalidShortURL, ""), Count: 2, Visitor: safariUS},
			ClickCount{Code: OrphanCode(OrphanRegular404, "a.example"), Count: 1, Visitor: chromeDE}))
	return f
}

// orphanRows lists every orphan row the filter keeps, a page of limit at
// a time.
func orphanRows(t testing.TB, f *FSM, filter OrphanFilter, q RowQuery, limit uint64) []VisitRow {
	return pagedRows(t, q, limit, func(q RowQuery) VisitRows { return f.OrphanVisitRows(filter, q) })
}

func countKinds(rows []VisitRow) map[string]int {
	out := map[string]int{}
	for _, r := range rows {
		if r.Code != "" {
			out["link "+r.Code]++
			continue
		}
		out[r.Domain+" "+r.Kind.String()]++
	}
	return out
}

func TestOrphanRows(t *testing.T) {
	f := orphaned(t)
	all := OrphanFilter{AnyKind: true, AnyDomain: true}
	everything := RowQuery{To: 1 << 50}
	tests := []struct {
		name   string
		filter OrphanFilter
		q      RowQuery
		want   map[string]int
	}{
		{"all", all, everything, map[string]int{" base_url": 3, " invalid_short_url": 2, "a.example regular_404": 4}},
		{"no bots", all, RowQuery{To: 1 << 50, ExcludeBots: true}, map[string]int{" base_url": 2, " invalid_short_url": 2, "a.example regular_404": 4}},
		{"one kind", OrphanFilter{Kind: OrphanRegular404, AnyDomain: true}, everything, map[string]int{"a.example regular_404": 4}},
		{"default domain", OrphanFilter{AnyKind: true}, everything, map[string]int{" base_url": 3, " invalid_short_url": 2}},
		{"kind and domain", OrphanFilter{Kind: OrphanBaseURL, Domain: "a.example"}, everything, map[string]int{}},
		{"the second day", all, RowQuery{From: talliesDay + dayMillis, To: 1 << 50}, map[string]int{" invalid_short_url": 2, "a.example regular_404": 1}},
		{"one hour", all, RowQuery{From: talliesDay + 3*hour, To: talliesDay + 4*hour}, map[string]int{" base_url": 3, "a.example regular_404": 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []uint64{1, 2, 100} {
				rows := orphanRows(t, f, tc.filter, tc.q, limit)
				if got := countKinds(rows); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("page %d: rows %v, want %v", limit, got, tc.want)
				}
				for i := 1; i < len(rows); i++ {
					if rows[i].At > rows[i-1].At {
						t.Fatalf("page %d: row %d at %d after row %d at %d", limit, i, rows[i].At, i-1, rows[i-1].At)
					}
				}
			}
		})
	}
	rows := orphanRows(t, f, OrphanFilter{Kind: OrphanBaseURL}, everything, 10)
	var chrome, bots int
	for _, r := range rows {
		switch {
		case r.Bot == Preview:
			bots++
		case r.Browser == Chrome && r.Country == "DE" && r.Referrer == "news.example" && r.OS == Windows:
			chrome++
		}
	}
	if chrome != 2 || bots != 1 {
		t.Errorf("base URL rows %v, want 2 of Chrome from DE by news.example and a preview bot", rows)
	}
	if counts := f.OrphanVisitRows(all, RowQuery{To: 1 << 50}); counts.NonBots != 8 || counts.Bots != 1 || len(counts.Rows) != 0 {
		t.Errorf("a query of no rows counts %d and %d bots, lists %d", counts.NonBots, counts.Bots, len(counts.Rows))
	}
}

func TestOrphansOnlyOnceRaised(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelCerts}.Encode())
	visit := func(seq uint64, code string) []byte {
		return visitorsAt("n1", seq, talliesDay, ClickCount{Code: code, Count: 1, Visitor: chromeDE})
	}
	applyFrom(f, 10, visit(1, OrphanCode(OrphanBaseURL, "")))
	if f.Level() != LevelCerts || f.OrphanVisitRows(OrphanFilter{AnyKind: true, AnyDomain: true}, RowQuery{To: 1 << 50}).NonBots != 0 {
		t.Fatal("an orphan visit counted before the raise")
	}
	applyFrom(f, 11, RaiseCommand{To: LevelVisitRows}.Encode(),
		visit(2, OrphanCode(OrphanBaseURL, "")),
		visit(3, OrphanCode(OrphanBaseURL, "nosuch.example")), // no such domain
		visit(4, "/z"), // no such kind
		clickAt("n1", 5, talliesDay, ClickCount{Code: OrphanCode(OrphanBaseURL, ""), Count: 7}), // no visitors
		visit(2, OrphanCode(OrphanBaseURL, "")),                                                 // a batch resent
	)
	if got := countKinds(orphanRows(t, f, OrphanFilter{AnyKind: true, AnyDomain: true}, RowQuery{To: 1 << 50}, 10)); fmt.Sprint(got) != "map[ base_url:1]" {
		t.Errorf("rows %v, want the one base URL visit after the raise", got)
	}
	// An older build's downgraded batch carries no orphan visit.
	b := ClickBatch{Node: "n1", Seq: 9, Visitors: true, Counts: []ClickCount{{Code: OrphanCode(OrphanRegular404, ""), Count: 1}, {Code: "x", Count: 1}}}
	if got := b.WithoutVisitors().Counts; len(got) != 1 || got[0].Code != "x" {
		t.Errorf("downgraded counts %v", got)
	}
}

func TestOrphanTupleBound(t *testing.T) {
	f := orphaned(t)
	var counts []ClickCount
	for i := range 3 * MaxTuplesPerHour {
		counts = append(counts, ClickCount{Code: OrphanCode(OrphanRegular404, ""), Count: 1, Visitor: variedVisitor(i)})
	}
	applyFrom(f, 50, visitorsAt("n3", 1, talliesDay+2*dayMillis, counts...))
	lv := f.s.orphans.byKey[orphanKey{"", OrphanRegular404}]
	h := lv.days[0].tallies[0]
	if h.people() != MaxTuplesPerHour || h.overflow == 0 {
		t.Errorf("the hour keeps %d tuples and %d past the bound, want %d and more", h.people(), h.overflow, MaxTuplesPerHour)
	}
	rows := orphanRows(t, f, OrphanFilter{Kind: OrphanRegular404}, RowQuery{To: 1 << 50}, 100)
	if len(rows) != len(counts) {
		t.Errorf("%d rows, want %d", len(rows), len(counts))
	}
}

func TestOrphansSnapshot(t *testing.T) {
	f := orphaned(t)
	first := snapshotBytes(t, f)
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(first)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, restored), first) {
		t.Fatal("a restored state writes other bytes")
	}
	more := visitorsAt("n9", 1, talliesDay+dayMillis+5*hour,
		ClickCount{Code: OrphanCode(OrphanInvalidShortURL, ""), Count: 2, Visitor: Visitor{Referrer: "a.example", Browser: Firefox}})
	applyFrom(f, 100, more)
	applyFrom(restored, 100, more)
	if !bytes.Equal(snapshotBytes(t, restored), snapshotBytes(t, f)) {
		t.Fatal("after the same visits the states differ")
	}
	all, q := OrphanFilter{AnyKind: true, AnyDomain: true}, RowQuery{To: 1 << 50}
	if a, b := orphanRows(t, f, all, q, 100), orphanRows(t, restored, all, q, 100); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("the restored state lists other rows")
	}
}

func TestSnapshotSharesOrphans(t *testing.T) {
	f := orphaned(t)
	before := snapshotBytes(t, f)
	f.mu.Lock()
	snap, err := f.s.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Unlock()
	defer snap.Release()
	applyFrom(f, 100, visitorsAt("n9", 1, talliesDay+dayMillis+5*hour,
		ClickCount{Code: OrphanCode(OrphanInvalidShortURL, ""), Count: 2, Visitor: Visitor{Referrer: "a.example"}},
		ClickCount{Code: OrphanCode(OrphanInvalidShortURL, ""), Count: 1, Visitor: safariUS},
		ClickCount{Code: OrphanCode(OrphanBaseURL, "a.example"), Count: 1, Visitor: safariUS}),
		OrphanVisitsDeleteCommand{Now: 2, KeyID: RootKeyID}.Encode())
	var buf bytes.Buffer
	if err := snap.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), before) {
		t.Fatal("a snapshot saw orphan visits applied after it was taken")
	}
}

func TestSnapshotRefusesBadOrphans(t *testing.T) {
	tests := map[string]func(o *orphanTable){
		"unknown domain": func(o *orphanTable) {
			o.byKey[orphanKey{"b.example", OrphanBaseURL}] = o.byKey[orphanKey{"", OrphanBaseURL}]
		},
		"unknown kind": func(o *orphanTable) {
			o.byKey[orphanKey{"", orphanKinds}] = o.byKey[orphanKey{"", OrphanBaseURL}]
		},
		"day out of order": func(o *orphanTable) {
			lv := o.byKey[orphanKey{"a.example", OrphanRegular404}]
			lv.days[0], lv.days[1] = lv.days[1], lv.days[0]
		},
		"tallies past the day": func(o *orphanTable) {
			o.byKey[orphanKey{"", OrphanBaseURL}].days[0].tallies[0].tuples[0].count += 5
		},
		"day without tallies": func(o *orphanTable) {
			o.byKey[orphanKey{"", OrphanBaseURL}].days[0].tallies = nil
		},
	}
	for name, corrupt := range tests {
		t.Run(name, func(t *testing.T) {
			f := orphaned(t)
			corrupt(&f.s.orphans)
			_, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, f)))
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Errorf("ReadSnapshot = %v, want ErrCorruptSnapshot", err)
			}
		})
	}
}

func TestOrphansRetention(t *testing.T) {
	f := orphaned(t)
	late := talliesDay + dayMillis + ClickRetentionHours*hour
	applyFrom(f, 100, visitorsAt("n9", 1, late, ClickCount{Code: OrphanCode(OrphanRegular404, ""), Count: 1, Visitor: chromeDE}))
	all, q := OrphanFilter{AnyKind: true, AnyDomain: true}, RowQuery{To: 1 << 50}
	rows := orphanRows(t, f, all, q, 100)
	if got := countKinds(rows); fmt.Sprint(got) != "map[ invalid_short_url:2  regular_404:1 a.example regular_404:1]" {
		t.Errorf("rows %v, want the second day's and the late one", got)
	}
	restored := New()
	if err := restored.Restore(nopCloser{bytes.NewReader(snapshotBytes(t, f))}); err != nil {
		t.Fatal(err)
	}
	if got := orphanRows(t, restored, all, q, 100); len(got) != len(rows) {
		t.Errorf("restored %d rows, want %d", len(got), len(rows))
	}
}

func TestDeleteOrphanVisits(t *testing.T) {
	del := func(key string) []byte { return OrphanVisitsDeleteCommand{Now: 5000, KeyID: key}.Encode() }
	t.Run("before the raise", func(t *testing.T) {
		f := New()
		applyAll(t, f, InitCommand{Key: testKey}.Encode())
		if err, _ := applyAll(t, f, del(RootKeyID))[0].(error); !errors.Is(err, ErrNotRaised) {
			t.Errorf("delete before the raise = %v, want ErrNotRaised", err)
		}
	})
	f := orphaned(t)
	key := testAPIKey("bbbbbbbbbbbb", ScopeLinksWrite, AllWorkspaces)
	applyFrom(f, 50, KeyCreateCommand{Key: key, By: RootKeyID, Now: 1}.Encode())
	for _, by := range []string{"nosuchkey", key.ID} {
		if got, _ := applyAll(t, f, del(by))[0].(error); !errors.Is(got, ErrUnauthorized) {
			t.Errorf("delete by %q = %v, want ErrUnauthorized", by, got)
		}
	}
	if got := applyAll(t, f, del(RootKeyID))[0]; got != uint64(9) {
		t.Fatalf("deleted %v visits, want 9", got)
	}
	if v := f.OrphanVisitRows(OrphanFilter{AnyKind: true, AnyDomain: true}, RowQuery{To: 1 << 50}); v.NonBots+v.Bots != 0 {
		t.Errorf("after deleting: %+v", v)
	}
	if a := f.Audit(AuditQuery{Kind: AuditLinks, Limit: 1})[0]; a.Action != AuditLinkEdit || a.Subject != orphanAuditSubject {
		t.Errorf("audit %+v", a)
	}
	if got := applyAll(t, f, del(RootKeyID))[0]; got != uint64(0) {
		t.Errorf("deleting again forgot %v", got)
	}
}

func TestRemovedDomainDropsOrphans(t *testing.T) {
	f := orphaned(t)
	applyFrom(f, 50, DomainCommand{Domain: Domain{Name: "a.example"}, Remove: true, By: RootKeyID, Now: 2}.Encode())
	got := countKinds(orphanRows(t, f, OrphanFilter{AnyKind: true, AnyDomain: true}, RowQuery{To: 1 << 50}, 100))
	if fmt.Sprint(got) != "map[ base_url:3  invalid_short_url:2]" {
		t.Errorf("rows %v, want the default domain's alone", got)
	}
	// Registered again, it starts with none.
	applyFrom(f, 51, DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID, Now: 3}.Encode())
	if v := f.OrphanVisitRows(OrphanFilter{AnyKind: true, Domain: "a.example"}, RowQuery{To: 1 << 50}); v.NonBots != 0 {
		t.Errorf("a domain registered again has %d orphan visits", v.NonBots)
	}
}
