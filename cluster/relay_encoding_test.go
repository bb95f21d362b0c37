package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// fillEveryField sets every field of the struct v points to, and of the
// structs, pointers, slices and arrays inside it, to a value that is not
// its zero, every number and string its own. A value that is filled and
// then round-tripped through an encoding comes back different when the
// encoding leaves out any field, one added later included.
func fillEveryField(t *testing.T, v any) {
	t.Helper()
	next := 0
	var fill func(v reflect.Value, path string)
	fill = func(v reflect.Value, path string) {
		next++
		switch v.Kind() {
		case reflect.String:
			v.SetString(fmt.Sprintf("%s-%d", path, next))
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(int64(next))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(uint64(next))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), path)
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			fill(v.Index(0), path+"[0]")
		case reflect.Array:
			for i := range v.Len() {
				fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if !f.IsExported() {
					t.Fatalf("%s.%s is unexported: the test cannot fill it", path, f.Name)
				}
				fill(v.Field(i), path+"."+f.Name)
			}
		default:
			t.Fatalf("%s: the test cannot fill a %s", path, v.Kind())
		}
	}
	fill(reflect.ValueOf(v).Elem(), reflect.TypeOf(v).Elem().Name())
}

// everyCreateField is a create with every field set, within what the
// log's encoding carries (checkCreate, a known device and browser).
func everyCreateField(t *testing.T) fsm.CreateRequest {
	var r fsm.CreateRequest
	fillEveryField(t, &r)
	r.Strategy, r.CodeLength = fsm.StrategyHash, 7
	r.Options.Rules[0].Device, r.Options.Rules[0].Browser = fsm.DeviceMobile, fsm.Firefox
	return r
}

// everyLinkField is a link with every field set, within what the
// encoding carries (a known device and browser).
func everyLinkField(t *testing.T) fsm.Link {
	var l fsm.Link
	fillEveryField(t, &l)
	l.Options.Rules[0].Device, l.Options.Rules[0].Browser = fsm.DeviceMobile, fsm.Firefox
	return l
}

// relayRoundTrip is what the leader reads of reqs as a follower relays
// them: the sender's side, the JSON on the wire, the receiver's side.
func relayRoundTrip(t *testing.T, reqs []fsm.CreateRequest, asEntry bool) []fsm.CreateRequest {
	t.Helper()
	body, err := json.Marshal(relayBatchOf(reqs, asEntry))
	if err != nil {
		t.Fatal(err)
	}
	var batch wire.CreateBatch
	if err := wire.Decode(body, &batch); err != nil {
		t.Fatal(err)
	}
	if sentEntry := len(batch.Entry) > 0; sentEntry != asEntry || sentEntry == (len(batch.Items) > 0) {
		t.Fatalf("body %s: want only the entry (%v) or only the legacy items", body, asEntry)
	}
	got, refused, err := relayedCreates(batch)
	if err != nil {
		t.Fatalf("the leader refused the batch: %v", err)
	}
	for i, err := range refused {
		if err != nil {
			t.Fatalf("the leader refused item %d: %v", i, err)
		}
	}
	return got
}

// TestRelayCarriesEveryCreateField: a create comes out of the relay as it
// went in, whatever fields it sets and whichever entry type its batch is
// written as.
func TestRelayCarriesEveryCreateField(t *testing.T) {
	t.Parallel()
	full := everyCreateField(t)
	notImported := full
	notImported.CreatedAt, notImported.Clicks = 0, 0
	plain := fsm.CreateRequest{RequestID: "k", URL: "https://example.com/", Workspace: "default", CodeLength: 7, KeyID: "key"}
	tests := []struct {
		name string
		reqs []fsm.CreateRequest
	}{
		{"every field", []fsm.CreateRequest{full}},
		{"every field but an import's", []fsm.CreateRequest{notImported}},
		{"no options or domain", []fsm.CreateRequest{plain}},
		{"a batch of each", []fsm.CreateRequest{plain, notImported, full}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := relayRoundTrip(t, tt.reqs, true); !reflect.DeepEqual(got, tt.reqs) {
				t.Fatalf("relayed\n%+v\ncame out as\n%+v", tt.reqs, got)
			}
		})
	}
}

// TestLinkAnswersCarryEveryLinkField: a link comes out of either answer
// that carries one (GET links/{code}, a relayed create's result) as the
// leader holds it, and only in the state machine's encoding.
func TestLinkAnswersCarryEveryLinkField(t *testing.T) {
	t.Parallel()
	link := everyLinkField(t)
	tests := []struct {
		name string
		// roundTrip answers l as the leader does and reads the answer as
		// the receiver does: the forms the answer held and the link read.
		roundTrip func(t *testing.T, l fsm.Link) (legacy *wire.Link, encoded []byte, got fsm.Link, err error)
	}{
		{"GET links/{code}", func(t *testing.T, l fsm.Link) (*wire.Link, []byte, fsm.Link, error) {
			var a wire.LinkAnswer
			overTheWire(t, linkAnswer(l, true, true), &a)
			if !a.Found {
				t.Fatal("the answer does not say found")
			}
			got, err := a.FSMLink()
			return a.Link, a.LinkBytes, got, err
		}},
		{"POST creates", func(t *testing.T, l fsm.Link) (*wire.Link, []byte, fsm.Link, error) {
			var a wire.CreateBatchAnswer
			result := toWireResult(createReply{res: fsm.CreateResult{Link: l, Existing: true}, index: 7}, true)
			overTheWire(t, wire.CreateBatchAnswer{V: wire.Version, Results: []wire.CreateResult{result}}, &a)
			r := relayedReply(a.Results[0], true)
			if r.err == nil && (!r.res.Existing || r.index != 7 || r.res.Err != nil) {
				t.Fatalf("reply %+v, want the link, existing, at index 7", r)
			}
			return a.Results[0].Link, a.Results[0].LinkBytes, r.res.Link, r.err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			legacy, encoded, got, err := tt.roundTrip(t, link)
			if err != nil || !reflect.DeepEqual(got, link) {
				t.Fatalf("answered\n%+v\ncame out as\n%+v (%v)", link, got, err)
			}
			if legacy != nil || len(encoded) == 0 {
				t.Fatalf("the answer held %+v and %d encoded bytes: want the encoded link only", legacy, len(encoded))
			}
		})
	}
}

// overTheWire sends msg as JSON and decodes it into out, as the receiver
// does.
func overTheWire(t *testing.T, msg wire.Message, out wire.Message) {
	t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.Decode(body, out); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// TestRelaySpeaksToOlderBuilds: what a build before fsm.LevelWire sends
// (written out here as it sends it) still reads right, what this build
// sends such a build is in the fields it reads, and a create those fields
// cannot carry is not sent in them.
func TestRelaySpeaksToOlderBuilds(t *testing.T) {
	t.Parallel()
	opts := &fsm.Options{Title: "t", Tags: []string{"a"}, MaxVisits: 3, Rules: []fsm.Rule{{Device: fsm.DeviceIOS, URL: "https://example.com/ios"}}}
	encodedOpts := base64.StdEncoding.EncodeToString(fsm.EncodeOptions(opts))
	link := fsm.Link{
		ID: 3, Code: "abc", Domain: "go.example", URL: "https://example.com/a", Workspace: "default", Canonical: "https://example.com/a",
		CreatedAt: 1700000000000, ExpiresAt: 1800000000000, Clicks: 2, LastAccess: 1700000000001, Options: opts,
	}
	oldLink := `{"id":3,"code":"abc","url":"https://example.com/a","workspace":"default","canonical":"https://example.com/a",` +
		`"created_at_ms":1700000000000,"expires_at_ms":1800000000000,"clicks":2,"last_access_ms":1700000000001,"domain":"go.example","options":"` + encodedOpts + `"}`

	t.Run("creates an older follower relays", func(t *testing.T) {
		body := `{"v":1,"items":[` +
			`{"request_id":"r1","url":"https://example.com/a","canonical":"https://example.com/a","workspace":"default","custom_code":"abc",` +
			`"strategy":"hash","dedupe":true,"expires_at_ms":1800000000000,"code_length":7,"key_id":"kid","domain":"go.example","options":"` + encodedOpts + `"},` +
			`{"url":"https://example.com/b","workspace":"default","code_length":7}]}`
		want := []fsm.CreateRequest{
			{RequestID: "r1", URL: "https://example.com/a", Canonical: "https://example.com/a", Workspace: "default", CustomCode: "abc",
				Strategy: fsm.StrategyHash, Dedupe: true, ExpiresAt: 1800000000000, CodeLength: 7, KeyID: "kid", Domain: "go.example", Options: opts},
			{URL: "https://example.com/b", Workspace: "default", CodeLength: 7},
		}
		var batch wire.CreateBatch
		if err := wire.Decode([]byte(body), &batch); err != nil {
			t.Fatal(err)
		}
		got, refused, err := relayedCreates(batch)
		if err != nil || refused[0] != nil || refused[1] != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("read %+v (refused %v, %v), want %+v", got, refused, err, want)
		}
	})
	t.Run("a result an older leader answers", func(t *testing.T) {
		var answer wire.CreateBatchAnswer
		if err := wire.Decode([]byte(`{"v":1,"results":[{"link":`+oldLink+`,"existing":true,"index":9}]}`), &answer); err != nil {
			t.Fatal(err)
		}
		r := relayedReply(answer.Results[0], true)
		if r.err != nil || r.index != 9 || !r.res.Existing || !reflect.DeepEqual(r.res.Link, link) {
			t.Fatalf("reply %+v, want %+v existing at index 9", r, link)
		}
	})
	t.Run("a link an older leader answers", func(t *testing.T) {
		var answer wire.LinkAnswer
		if err := wire.Decode([]byte(`{"v":1,"found":true,"link":`+oldLink+`}`), &answer); err != nil {
			t.Fatal(err)
		}
		if got, err := answer.FSMLink(); err != nil || !reflect.DeepEqual(got, link) {
			t.Fatalf("read %+v (%v), want %+v", got, err, link)
		}
	})
	t.Run("what this build answers an older one", func(t *testing.T) {
		result := toWireResult(createReply{res: fsm.CreateResult{Link: link}}, false)
		answer := linkAnswer(link, true, false)
		if result.LinkBytes != nil || answer.LinkBytes != nil {
			t.Fatalf("result %+v, answer %+v: an older build reads the legacy link only", result, answer)
		}
		for _, l := range []*wire.Link{result.Link, answer.Link} {
			if got, err := l.FSM(); err != nil || !reflect.DeepEqual(got, link) {
				t.Fatalf("legacy link %+v (%v), want %+v", got, err, link)
			}
		}
	})
	t.Run("what this build relays to an older one", func(t *testing.T) {
		notImported := everyCreateField(t)
		if legacyCarries(&notImported) {
			t.Fatal("the legacy fields have no crawlable flag, browser or addresses")
		}
		notImported.CreatedAt, notImported.Clicks = 0, 0
		notImported.Options.Crawlable = false
		notImported.Options.Rules[0].Browser, notImported.Options.Rules[0].Addresses = fsm.BrowserOther, nil
		notImported.Options.Rules[0].Country = "" // a country rule is of LevelVisitRows too
		if !legacyCarries(&notImported) {
			t.Fatal("the legacy fields should carry a create without an import's fields or LevelVisitRows's")
		}
		reqs := []fsm.CreateRequest{notImported, {URL: "https://example.com/b", Workspace: "default", CodeLength: 7}}
		if got := relayRoundTrip(t, reqs, false); !reflect.DeepEqual(got, reqs) {
			t.Fatalf("relayed\n%+v\ncame out as\n%+v", reqs, got)
		}
		for _, imported := range []fsm.CreateRequest{{CreatedAt: 1}, {Clicks: 1}} {
			if legacyCarries(&imported) {
				t.Fatalf("%+v: the legacy fields have no creation time or clicks", imported)
			}
		}
	})
}

// TestRelayRefusesCorruptEncodings: a relayed entry or an answered link
// that does not decode, or a relayed entry that is not a create batch, is
// refused whole and applies nothing.
func TestRelayRefusesCorruptEncodings(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	kept := createURL(t, n, "https://example.com/kept")
	entry := fsm.CreateBatch{Items: []fsm.CreateRequest{{URL: "https://example.com/new", Workspace: "default", CodeLength: 7}}}.Encode()
	post := func(entry []byte) (int, string) {
		body, _ := json.Marshal(wire.CreateBatch{V: wire.Version, Entry: entry})
		ctx := serveInternal(n, net.IPv4(127, 0, 0, 1), "POST", wire.PathCreates, body, "n2")
		return ctx.Response.StatusCode(), string(ctx.Response.Body())
	}
	tests := []struct {
		name  string
		entry []byte
	}{
		{"a deletion", fsm.DeleteCommand{Code: kept.Code, Now: time.Now().UnixMilli()}.Encode()},
		{"a click batch", fsm.ClickBatch{Node: "n2", Seq: 1, Now: 1, Counts: []fsm.ClickCount{{Code: kept.Code, Count: 5}}}.Encode()},
		{"cut short", entry[:len(entry)-1]},
		{"not an entry", []byte("items")},
	}
	for i := range entry {
		flipped := bytes.Clone(entry)
		flipped[i] ^= 0x10
		tests = append(tests, struct {
			name  string
			entry []byte
		}{fmt.Sprintf("byte %d changed", i), flipped})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.FSM().Len()
			if status, body := post(tt.entry); status != 400 {
				t.Fatalf("got %d %s, want 400", status, body)
			}
			if got, ok := n.FSM().Get(kept.Code); n.FSM().Len() != before || !ok || got.Clicks != 0 {
				t.Fatalf("a refused batch changed the state: %d links, was %d; %+v", n.FSM().Len(), before, got)
			}
		})
	}
	if status, body := post(entry); status != 200 || !strings.Contains(body, `"link_bytes":`) || strings.Contains(body, `"link":`) {
		t.Fatalf("the intact entry: %d %s, want the encoded link only", status, body)
	}

	encoded := fsm.EncodeLink(kept)
	for i := range encoded {
		flipped := bytes.Clone(encoded)
		flipped[i] ^= 0x10
		if r := relayedReply(wire.CreateResult{LinkBytes: flipped, Index: 3}, true); r.err == nil {
			t.Fatalf("a result whose link has byte %d changed read as %+v", i, r.res.Link)
		}
		if l, err := (wire.LinkAnswer{Found: true, LinkBytes: flipped}).FSMLink(); err == nil {
			t.Fatalf("an answer whose link has byte %d changed read as %+v", i, l)
		}
	}
}

// TestLinkAnswersInTheFormAsked: GET links/{code} answers the encoded link
// to an asker that asks for it, the legacy link to one that does not (a
// build before fsm.LevelWire).
func TestLinkAnswersInTheFormAsked(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	l := createURL(t, n, "https://example.com/asked")
	tests := []struct {
		name, uri string
		has       string
		lacks     string
	}{
		{"asked for the encoding", wire.PathLinks + l.Code + "?" + wire.LinkBytesParam + "=1", `"link_bytes":`, `"link":`},
		{"as an older build asks", wire.PathLinks + l.Code, `"link":{"id":`, `"link_bytes":`},
		{"not found", wire.PathLinks + "nope?" + wire.LinkBytesParam + "=1", `"found":false`, `"link`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := serveInternal(n, net.IPv4(127, 0, 0, 1), "GET", tt.uri, nil, "n2")
			body := string(ctx.Response.Body())
			if ctx.Response.StatusCode() != 200 || !strings.Contains(body, tt.has) || strings.Contains(body, tt.lacks) {
				t.Fatalf("got %d %s, want %s and no %s", ctx.Response.StatusCode(), body, tt.has, tt.lacks)
			}
		})
	}
}

// TestRelayedCreateKeepsEveryFieldOnBothNodes: a create with options, a
// domain, a creation time and clicks, relayed by a follower, is stored
// with all of them on both nodes, and the follower reads the same link
// from the leader.
func TestRelayedCreateKeepsEveryFieldOnBothNodes(t *testing.T) {
	t.Parallel()
	leader, follower := openPair(t, 5*time.Second)
	ctx := context.Background()
	if _, err := leader.Propose(ctx, fsm.DomainCommand{Domain: fsm.Domain{Name: "go.example"}, By: fsm.RootKeyID, Now: time.Now().UnixMilli()}, ProposeOptions{Visible: true}); err != nil {
		t.Fatalf("register the domain: %v", err)
	}
	opts := &fsm.Options{Title: "relayed", Tags: []string{"a"}, MaxVisits: 9, ForwardQuery: true, PublicStats: true,
		Rules: []fsm.Rule{{Device: fsm.DeviceIOS, Language: "en", URL: "https://example.com/ios"}}}
	created := time.Now().Add(-time.Hour).UnixMilli()
	req := fsm.CreateRequest{URL: "https://example.com/relayed", Workspace: "default", CustomCode: "relayed", CodeLength: 7,
		KeyID: fsm.RootKeyID, Domain: "go.example", Options: opts, CreatedAt: created, Clicks: 42}
	res, err := follower.Create(ctx, req)
	if err != nil || res.Err != nil {
		t.Fatalf("create through the follower: %v %v", err, res.Err)
	}
	l := res.Link
	if l.Domain != req.Domain || l.Code != req.CustomCode || l.CreatedAt != created || l.Clicks != 42 || !reflect.DeepEqual(l.Options, opts) {
		t.Fatalf("the follower answered %+v for %+v", l, req)
	}
	for name, m := range map[string]*member{"leader": leader, "follower": follower} {
		if got, ok := m.FSM().Get(l.Qualified()); !ok || !reflect.DeepEqual(got, l) {
			t.Fatalf("on the %s: %+v (found %v), want %+v", name, got, ok, l)
		}
	}
	fetched, err := follower.leaderLink(ctx, l.Qualified())
	if err != nil || !reflect.DeepEqual(fetched, l) {
		t.Fatalf("the follower asked the leader: %+v (%v), want %+v", fetched, err, l)
	}
}
