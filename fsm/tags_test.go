package fsm

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

var raiseVisitRows = RaiseCommand{To: LevelVisitRows}.Encode()

// extendedOptions has every field LevelVisitRows added.
func extendedOptions() *Options {
	return &Options{Title: "t", Tags: []string{"a"}, Crawlable: true, Rules: []Rule{
		{Device: DeviceIOS, URL: "https://example.com/ios"},
		{Browser: Firefox, Addresses: []string{"10.0.0.0/8", "192.168.*.1"}, URL: "https://example.com/lan"},
	}}
}

// visitRowsCommands are the commands of LevelVisitRows this file writes.
func visitRowsCommands() map[string]Command {
	return map[string]Command{
		"create extended": CreateBatch{Now: 1, Items: []CreateRequest{{URL: "https://example.com/", Workspace: "w", CustomCode: "n", Options: extendedOptions()}}},
		"edit crawlable":  EditCommand{Code: "x", Now: 1, Fields: EditCrawlable | EditTitle, Title: "t", Crawlable: true},
		"edit rules":      EditCommand{Code: "x", Now: 1, Fields: EditRules, Rules: extendedOptions().Rules},
		"edit country":    EditCommand{Code: "x", Now: 1, Fields: EditRules, Rules: []Rule{{Country: "GB", URL: "https://example.co.uk/"}}},
		"domain invalid":  DomainCommand{Domain: Domain{Name: "a.example", InvalidRedirect: "https://example.com/x"}, By: RootKeyID, Now: 1},
		"default domain":  DomainCommand{Domain: Domain{RootRedirect: "https://example.com/r"}, By: RootKeyID, Now: 1},
		"tags rename":     TagsCommand{Tag: "a", NewName: "b", Workspaces: []string{"w"}, KeyID: RootKeyID, Now: 1},
		"tags delete":     TagsCommand{Tag: "a", KeyID: "k", Now: 1},
	}
}

// TestVisitRowsCommandLevels: each new command needs LevelVisitRows, its
// entry says so, and it decodes back to itself; the same commands without
// the new fields keep their old entry types.
func TestVisitRowsCommandLevels(t *testing.T) {
	for name, cmd := range visitRowsCommands() {
		entry := cmd.Encode()
		if cmd.Level() != LevelVisitRows || RequiredLevel(entry) != LevelVisitRows {
			t.Errorf("%s: level %d, entry level %d", name, cmd.Level(), RequiredLevel(entry))
		}
		back, err := DecodeCommand(entry)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(back, cmd) || !bytes.Equal(back.Encode(), entry) {
			t.Errorf("%s: decoded %+v", name, back)
		}
	}
	old := map[string]Command{
		"create with options": CreateBatch{Now: 1, Items: []CreateRequest{{URL: "https://example.com/", Options: &Options{Title: "t"}}}},
		"edit rules":          EditCommand{Code: "x", Fields: EditRules, Rules: []Rule{{Device: DeviceIOS, URL: "https://example.com/"}}},
		"domain":              DomainCommand{Domain: Domain{Name: "a.example", RootRedirect: "https://example.com/"}, By: RootKeyID},
	}
	for name, cmd := range old {
		if typ := commandType(cmd.Encode()[0] &^ sealedFlag); typ >= cmdVisitsDelete {
			t.Errorf("%s: entry type %d, a type of LevelVisitRows", name, typ)
		}
	}
}

// TestVisitRowsDecodeRefuses: the old entry types cannot smuggle the new
// fields, and bad new entries are refused.
func TestVisitRowsDecodeRefuses(t *testing.T) {
	crawlable := EditCommand{Code: "x", Fields: EditCrawlable, Crawlable: true}.Encode()
	asOld := slices.Clone(crawlable[:len(crawlable)-sealedBytes])
	asOld[0] = byte(cmdEdit) // unsealed: the checksum no longer matters
	badBrowser := EditCommand{Code: "x", Fields: EditRules, Rules: []Rule{{Browser: Firefox, URL: "https://example.com/"}}}.Encode()
	badBrowser = slices.Clone(badBrowser[:len(badBrowser)-sealedBytes])
	badBrowser[0] &^= sealedFlag
	badBrowser[len(badBrowser)-2] = 99 // the browser byte, before the empty address list
	tags := TagsCommand{Tag: "a", KeyID: "k"}.Encode()
	tagsTrailing := append(slices.Clone(tags[:len(tags)-sealedBytes]), 0)
	tagsTrailing[0] &^= sealedFlag
	// Unsealed, so that the decoder's bounds are reached, not the checksum.
	tagsTruncated := slices.Clone(tags[:3])
	tagsTruncated[0] &^= sealedFlag
	for name, entry := range map[string][]byte{
		"crawlable in an old edit": asOld,
		"unknown browser":          badBrowser,
		"trailing bytes":           tagsTrailing,
		"truncated":                tagsTruncated,
	} {
		if _, err := DecodeCommand(entry); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestVisitRowsNeedTheRaise: before the cluster is raised to
// LevelVisitRows every new field is refused with ErrNotRaised and changes
// nothing; after it, each applies.
func TestVisitRowsNeedTheRaise(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelCerts}.Encode(),
		create(1, CreateRequest{URL: "https://example.com/", Workspace: "w", CustomCode: "x", Options: &Options{Tags: []string{"a"}}}))
	before := snapshotBytes(t, f)
	for name, cmd := range visitRowsCommands() {
		res := applyAll(t, f, cmd.Encode())[0]
		if results, ok := res.([]CreateResult); ok {
			res = results[0].Err
		}
		if err, _ := res.(error); !errors.Is(err, ErrNotRaised) {
			t.Errorf("%s before the raise: %v", name, res)
		}
	}
	if !bytes.Equal(before, snapshotBytes(t, f)) {
		t.Fatal("refused writes changed the state")
	}
	applyAll(t, f, raiseVisitRows)
	for _, name := range []string{"create extended", "edit crawlable", "edit rules", "domain invalid", "default domain", "tags rename"} {
		res := applyAll(t, f, visitRowsCommands()[name].Encode())[0]
		if results, ok := res.([]CreateResult); ok {
			res = results[0].Err
		}
		if err, ok := res.(error); ok && err != nil {
			t.Errorf("%s after the raise: %v", name, err)
		}
	}
	l, _ := f.Get("x")
	if !l.Options.Crawlable || !reflect.DeepEqual(l.Options.Rules, extendedOptions().Rules) || !slices.Equal(l.Options.Tags, []string{"b"}) {
		t.Errorf("x after the edits: %+v", l.Options)
	}
	if d := f.DefaultDomain(); d.RootRedirect != "https://example.com/r" {
		t.Errorf("default domain %+v", d)
	}
	// A country is two upper-case letters, or the rule is refused.
	for _, cc := range []string{"gb", "GBR", "G1"} {
		edit := EditCommand{Code: "x", Now: 2, Fields: EditRules, Rules: []Rule{{Country: cc, URL: "https://example.co.uk/"}}}
		if err, _ := applyAll(t, f, edit.Encode())[0].(error); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("a rule on country %q: %v", cc, err)
		}
	}
}

// TestSnapshotVersion10 round-trips every new field, and a state of a
// lower level still writes the version it did.
func TestSnapshotVersion10(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseVisitRows,
		DomainCommand{Domain: Domain{Name: "a.example", NotFoundRedirect: "https://example.com/404", InvalidRedirect: "https://example.com/gone"}, By: RootKeyID, Now: 1}.Encode(),
		DomainCommand{Domain: Domain{InvalidRedirect: "https://example.com/default-gone"}, By: RootKeyID, Now: 1}.Encode(),
		create(1, CreateRequest{URL: "https://example.com/", Workspace: "w", CustomCode: "x", Options: extendedOptions()},
			CreateRequest{URL: "https://example.com/", Workspace: "w", CustomCode: "y", Domain: "a.example", Options: &Options{Crawlable: true}}))
	data := snapshotBytes(t, f)
	if v := data[len(snapshotMagic)]; v != snapshotV10 {
		t.Fatalf("version %d", v)
	}
	g := roundTrip(t, f)
	if !reflect.DeepEqual(g.Domains(), f.Domains()) || g.DefaultDomain() != f.DefaultDomain() || g.Domains()[0].InvalidRedirect == "" {
		t.Errorf("domains %+v %+v", g.Domains(), g.DefaultDomain())
	}
	for _, code := range []string{"x", "a.example/y"} {
		a, _ := f.Get(code)
		b, _ := g.Get(code)
		if !reflect.DeepEqual(a.Options, b.Options) || !b.Options.Crawlable {
			t.Errorf("%s: %+v, want %+v", code, b.Options, a.Options)
		}
	}
	if got := g.CrawlableCodes("", 10, 2); !slices.Equal(got, []string{"x"}) {
		t.Errorf("crawlable codes %v", got)
	}
	// A state raised to LevelCerts only still writes version 9.
	h := New()
	applyAll(t, h, InitCommand{Key: testKey}.Encode(), raiseCerts)
	if v := snapshotBytes(t, h)[len(snapshotMagic)]; v != snapshotV9 {
		t.Errorf("a LevelCerts state writes version %d", v)
	}
}

// TestLinkAndOptionsEncodingCarryTheNewFields: between nodes, a link or
// options with the new fields keep them, and plain ones keep the old bytes.
func TestLinkAndOptionsEncodingCarryTheNewFields(t *testing.T) {
	o := extendedOptions()
	back, err := DecodeOptions(EncodeOptions(o))
	if err != nil || !reflect.DeepEqual(back, o) {
		t.Fatalf("options: %+v %v", back, err)
	}
	plain := &Options{Title: "t"}
	var e encoder
	encodeOptions(&e, plain)
	if !bytes.Equal(EncodeOptions(plain), e.buf) {
		t.Error("plain options changed encoding")
	}
	l := Link{Code: "x", URL: "https://example.com/", Options: o}
	got, err := DecodeLink(EncodeLink(l))
	if err != nil || !reflect.DeepEqual(got.Options, o) {
		t.Fatalf("link: %+v %v", got.Options, err)
	}
	if v := EncodeLink(Link{Code: "x", Options: plain})[0] &^ sealedFlag; v != linkEncodingV1 {
		t.Errorf("a plain link is sent as version %d", v)
	}
}

func TestTagsCommand(t *testing.T) {
	f := New()
	team := testAPIKey("teamkey00000", ScopeLinksRead|ScopeLinksWrite, "team")
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseVisitRows, KeyCreateCommand{Key: team, By: RootKeyID, Now: 1}.Encode(),
		create(1,
			CreateRequest{URL: "https://example.com/", Workspace: "team", CustomCode: "a", Options: &Options{Tags: []string{"News", "x"}}},
			CreateRequest{URL: "https://example.com/", Workspace: "team", CustomCode: "b", Options: &Options{Tags: []string{"news"}}},
			CreateRequest{URL: "https://example.com/", Workspace: "other", CustomCode: "c", Options: &Options{Tags: []string{"news", "y"}}}))
	apply := func(c TagsCommand) any { return applyAll(t, f, c.Encode())[0] }
	tags := func(code string) []string { l, _ := f.Get(code); return l.Options.Tags }
	cases := []struct {
		name string
		cmd  TagsCommand
		want error
	}{
		{"anonymous", TagsCommand{Tag: "news", NewName: "z"}, ErrUnauthorized},
		{"unknown", TagsCommand{Tag: "nope", NewName: "z", KeyID: team.ID}, ErrTagNotFound},
		{"another workspace only", TagsCommand{Tag: "y", NewName: "z", KeyID: team.ID}, ErrTagNotFound},
		{"onto a tag the key sees", TagsCommand{Tag: "news", NewName: "X", KeyID: team.ID}, ErrTagConflict},
		{"limited to a workspace", TagsCommand{Tag: "news", NewName: "z", KeyID: team.ID, Workspaces: []string{"other"}}, ErrTagNotFound},
		{"empty name", TagsCommand{Tag: "", KeyID: team.ID}, ErrInvalidRequest},
	}
	for _, c := range cases {
		if err, _ := apply(c.cmd).(error); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// "y" is a tag only of a link the key cannot see: no conflict.
	if res := apply(TagsCommand{Tag: "news", NewName: "y", KeyID: team.ID}); res != (TagsResult{Links: 2}) {
		t.Fatalf("rename: %v", res)
	}
	if res := apply(TagsCommand{Tag: "x", KeyID: team.ID}); res != (TagsResult{Links: 1}) {
		t.Fatalf("delete: %v", res)
	}
	for code, want := range map[string][]string{"a": {"y"}, "b": {"y"}, "c": {"news", "y"}} {
		if got := tags(code); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", code, got, want)
		}
	}
}

// TestTagsCommandBound: a tag on more than MaxTagLinks links is refused
// whole.
func TestTagsCommandBound(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseVisitRows)
	items := make([]CreateRequest, MaxTagLinks+1)
	for i := range items {
		items[i] = CreateRequest{URL: "https://example.com/", Workspace: "w", CodeLength: 7, Options: &Options{Tags: []string{"wide"}}}
	}
	applyAll(t, f, create(1, items...))
	res := applyAll(t, f, TagsCommand{Tag: "wide", NewName: "narrow", KeyID: RootKeyID}.Encode())[0]
	if err, _ := res.(error); !errors.Is(err, ErrTagTooWide) || len(f.Tags(nil, nil)) != 1 || f.Tags(nil, nil)[0].Tag != "wide" {
		t.Fatalf("%v; tags %+v", res, f.Tags(nil, nil))
	}
}

func TestAddressPatterns(t *testing.T) {
	cases := []struct {
		pattern, stored string
		match, miss     []string
	}{
		{"203.0.113.7", "203.0.113.7", []string{"203.0.113.7", "::ffff:203.0.113.7"}, []string{"203.0.113.8"}},
		{"10.1.2.3/8", "10.0.0.0/8", []string{"10.255.0.1"}, []string{"11.0.0.1", "::1"}},
		{"2001:DB8::/32", "2001:db8::/32", []string{"2001:db8::1"}, []string{"2001:db9::1", "10.0.0.1"}},
		{"192.168.*.*", "192.168.*.*", []string{"192.168.4.20"}, []string{"192.169.0.1", "::1"}},
		{"*.*.*.9", "*.*.*.9", []string{"1.2.3.9"}, []string{"1.2.3.90"}},
	}
	for _, c := range cases {
		p, err := ParseAddressPattern(c.pattern)
		if err != nil || p.String() != c.stored {
			t.Errorf("%s: %v %q", c.pattern, err, p.String())
			continue
		}
		for _, ip := range c.match {
			if !AddressMatches(c.stored, netip.MustParseAddr(ip)) {
				t.Errorf("%s does not match %s", c.pattern, ip)
			}
		}
		for _, ip := range c.miss {
			if AddressMatches(c.stored, netip.MustParseAddr(ip)) {
				t.Errorf("%s matches %s", c.pattern, ip)
			}
		}
	}
	for _, bad := range []string{"", "*", "1.2.3", "1.2.3.*.5", "01.2.3.*", "256.*.*.*", "1.2.3.4/33", "fe80::1%eth0", "::ffff:1.2.3.0/120", "a.b.c.d", "1.2.-3.*"} {
		if _, err := ParseAddressPattern(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		AddressMatches("192.168.*.*", netip.MustParseAddr("192.168.1.1"))
		AddressMatches("2001:db8::/32", netip.MustParseAddr("2001:db8::1"))
	}); n != 0 {
		t.Errorf("%v allocations per match", n)
	}
}
