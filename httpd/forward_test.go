package httpd

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
)

// TestForwardedCopiesShareTheBody: what a follower forwards, and what it
// relays back, shares the body it holds instead of copying it (an import
// it does not hold at all: it is sent on as it is read). A restore or
// a backup is hundreds of megabytes, and a copy of that is one memmove the
// Go runtime cannot preempt: while it runs, the collector waits for it with
// the other core, nothing else in the process runs, and Raft misses its
// heartbeats (bench/import-forward.sh lost the leader this way).
func TestForwardedCopiesShareTheBody(t *testing.T) {
	body := []byte(`{"short_code":"a","original_url":"https://example.com/"}` + "\n")
	var ctx fasthttp.RequestCtx
	client := &ctx.Request
	client.Header.SetMethod("POST")
	client.SetRequestURI("/admin/restore?x=1")
	client.Header.SetHost("sho.rt")
	client.Header.Set("Authorization", "Bearer t")
	client.SetBodyRaw(body)
	var forwarded fasthttp.Request
	forwardedCopy(&ctx, &forwarded)
	if got := forwarded.Body(); !bytes.Equal(got, body) || unsafe.SliceData(got) != unsafe.SliceData(body) {
		t.Fatalf("forwarded body %q is a copy or differs", got)
	}
	if string(forwarded.Header.Method()) != "POST" || string(forwarded.RequestURI()) != "/admin/restore?x=1" ||
		string(forwarded.Header.Peek("Authorization")) != "Bearer t" || string(forwarded.Host()) != "sho.rt" {
		t.Fatalf("forwarded request lost its header: %s", forwarded.Header.String())
	}
	if !bytes.Equal(client.Body(), body) {
		t.Fatalf("the client's request lost its body: %q", client.Body())
	}

	// An import still on the client's connection is sent on as a stream,
	// read as it goes: the follower never holds it.
	var importing fasthttp.RequestCtx
	importing.Request.Header.SetMethod("POST")
	importing.Request.SetRequestURI("/admin/import")
	importing.Request.Header.SetContentLength(len(body))
	importing.SetUserValue(streamedBodyKey{}, &streamedBody{r: bytes.NewReader(body), limit: len(body)})
	var streamed fasthttp.Request
	forwardedCopy(&importing, &streamed)
	if got, err := io.ReadAll(streamed.BodyStream()); !streamed.IsBodyStream() || err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a forwarded import: stream %v, read %q, %v", streamed.IsBodyStream(), got, err)
	}

	var answer, relayed fasthttp.Response
	answer.SetStatusCode(fasthttp.StatusCreated)
	answer.Header.Set("X-Test", "1")
	answer.SetBodyRaw(body)
	relayedCopy(&answer, &relayed)
	if got := relayed.Body(); relayed.StatusCode() != fasthttp.StatusCreated || string(relayed.Header.Peek("X-Test")) != "1" ||
		unsafe.SliceData(got) != unsafe.SliceData(body) {
		t.Fatalf("relayed answer %d %q, body %q (a copy?)", relayed.StatusCode(), relayed.Header.Peek("X-Test"), got)
	}
}

// TestPastExpiryMarkIsTheForwardingNodes: a follower forwards a Shlink
// edit of validUntil (a past one disables the link) with
// wire.PastExpiryHeader, so that the leader takes a past expiry; the
// mark is the follower's alone: a client that sends the header itself,
// through Shlink's API or linkraft's own, reaches the leader without it.
func TestPastExpiryMarkIsTheForwardingNodes(t *testing.T) {
	leader := &leaderElsewhere{answer: func(_ *fasthttp.Request, resp *fasthttp.Response) {
		resp.SetStatusCode(fasthttp.StatusOK)
		resp.SetBodyString(`{"short_code":"abc123","original_url":"https://example.com/abc","workspace":"team","created_at":"2026-01-02T03:04:05Z"}`)
	}}
	s := followerOf(t, leader)
	waitRaisedTo(t, s, fsm.LevelDisabled)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	mustCreate(t, s, `{"url":"https://example.com/abc","custom_code":"abc123","workspace":"team"}`)
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format("2006-01-02T15:04:05+00:00") }
	for _, c := range []struct {
		name, uri, body string
		header          []string
		marked          bool
	}{
		{"Shlink, past validUntil", "/rest/v3/short-urls/abc123", `{"validUntil":"` + at(-time.Hour) + `"}`, nil, true},
		// A date may pass on its way to the leader.
		{"Shlink, later validUntil", "/rest/v3/short-urls/abc123", `{"validUntil":"` + at(time.Hour) + `"}`, nil, true},
		{"Shlink, no validUntil, the client's header", "/rest/v3/short-urls/abc123", `{"title":"t"}`,
			[]string{wire.PastExpiryHeader, "1"}, false},
		{"linkraft's own, the client's header", "/api/v1/urls/abc123", `{"expires_at":"` + at(-time.Hour) + `"}`,
			[]string{wire.PastExpiryHeader, "1"}, false},
	} {
		before := len(leader.requests())
		ctx := do(s, "PATCH", c.uri, "application/json", c.body, append([]string{"X-Api-Key", key}, c.header...)...)
		sent := leader.requests()
		if status(ctx) != 200 || len(sent) != before+1 {
			t.Fatalf("%s: %d %s, %d requests forwarded", c.name, status(ctx), ctx.Response.Body(), len(sent)-before)
		}
		if got := sent[len(sent)-1].req.Header.Peek(wire.PastExpiryHeader); (len(got) > 0) != c.marked {
			t.Errorf("%s: forwarded with %s %q, want marked %v", c.name, wire.PastExpiryHeader, got, c.marked)
		}
	}
}

// TestClientsPastExpiryMarkIsIgnored: a client that sends the peers'
// past-expiry mark to linkraft's own API, on a leader's public port,
// gets the refusal every past expires_at gets, and the link is unchanged:
// the mark is believed only from a peer on the cluster port.
func TestClientsPastExpiryMarkIsIgnored(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaisedTo(t, s, fsm.LevelDisabled)
	_, key := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	mustCreate(t, s, `{"url":"https://example.com/abc","custom_code":"abc123","workspace":"team"}`)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, method := range []string{"PATCH", "POST"} {
		uri, body := "/api/v1/urls/abc123", `{"expires_at":"`+past+`"}`
		if method == "POST" {
			uri, body = "/api/v1/urls", `{"url":"https://example.com/new","workspace":"team","expires_at":"`+past+`"}`
		}
		ctx := do(s, method, uri, "application/json", body, "Authorization", "Bearer "+key, wire.PastExpiryHeader, "1")
		if status(ctx) != 400 || !strings.Contains(string(ctx.Response.Body()), "past") {
			t.Errorf("%s %s with the mark: %d %s, want 400 for a past expiry", method, uri, status(ctx), ctx.Response.Body())
		}
	}
	if l, _ := s.fsm.Get("abc123"); l.ExpiresAt != 0 || s.fsm.Len() != 1 {
		t.Errorf("the state changed: abc123 expires at %d, %d links", l.ExpiresAt, s.fsm.Len())
	}
}
