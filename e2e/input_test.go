package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// privateTargets point inside the network: refused by default, accepted
// with --allow-private-targets.
var privateTargets = []string{
	"http://127.0.0.1/",
	"http://127.1.2.3:8080/admin",
	"http://10.0.0.1/",
	"http://172.16.5.4/",
	"http://192.168.1.1/router",
	"http://169.254.169.254/latest/meta-data/",
	"http://100.64.0.1/",
	"http://224.0.0.1/",
	"http://0.0.0.0/",
	"http://240.0.0.1/",
	"http://2130706433/",
	"http://0x7f.1/",
	"http://0177.0.0.1/",
	"http://[::ffff:127.0.0.1]/",
	"http://[::1]/",
	"http://[::]/",
	"http://[fe80::1]/",
	"http://[fc00::1]/",
	"http://[ff02::1]/",
	"http://127.1/",
	"http://0/",
	"http://0x7f000001/",
	"http://100.127.255.254/",
	"http://172.31.255.255/",
	"http://[::ffff:7f00:1]/",
	"http://[0:0:0:0:0:ffff:127.0.0.1]/",
	"http://[::ffff:10.0.0.1]/",
	"http://localhost/",
	"http://localhost./",
	"http://LOCALHOST:8080/",
	"http://foo.localhost/",
	"http://printer.local/",
	"http://svc.internal/",
}

// publicTargets look a bit like private ones but are not; refusing them
// would be a false alarm a user notices.
var publicTargets = []string{
	"http://8.8.8.8/",
	"https://1.1.1.1/dns-query",
	"http://[2606:4700:4700::1111]/",
	"https://localhost.example.com/",
	"https://internal.example.com/",
	"https://local.example.org/",
}

// TestPrivateTargetsRejected covers the internal-target rules of
// docs/API.md: every private target is a 400 and nothing is stored.
func TestPrivateTargetsRejected(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	before := n.linkCount(t)
	for _, target := range privateTargets {
		t.Run(target, func(t *testing.T) {
			requireProblem(t, n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": target}), http.StatusBadRequest)
			form := n.request(t, http.MethodPost, "/shorten", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
				[]byte(url.Values{"url": {target}}.Encode()))
			requireProblem(t, form, http.StatusBadRequest)
		})
	}
	if after := n.linkCount(t); after != before {
		t.Errorf("refused private targets changed the link count from %d to %d", before, after)
	}

	for _, target := range publicTargets {
		t.Run("public "+target, func(t *testing.T) {
			l := n.createURL(t, target)
			n.requireRedirect(t, l.ShortCode, target)
		})
	}
}

// TestPrivateTargetsAllowedWithFlag covers --allow-private-targets: the same
// targets are stored and redirect.
func TestPrivateTargetsAllowedWithFlag(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{Settings: map[string]string{"allow-private-targets": "true"}})
	for _, target := range privateTargets {
		t.Run(target, func(t *testing.T) {
			l := n.createURL(t, target)
			n.requireRedirect(t, l.ShortCode, target)
		})
	}
}

// TestOversizedRequests covers 413 for URLs over 2048 bytes and bodies over
// 64 KiB, and that the limits themselves are allowed.
func TestOversizedRequests(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	urlOfLength := func(size int) string {
		const prefix = "https://example.com/"
		return prefix + strings.Repeat("a", size-len(prefix))
	}
	// jsonOfSize pads a valid create body with insignificant whitespace, so
	// only its size can be wrong.
	jsonOfSize := func(size int) []byte {
		body := []byte(`{"original_url": "https://example.com/padded"`)
		body = append(body, bytes.Repeat([]byte(" "), size-len(body)-1)...)
		return append(body, '}')
	}

	before := n.linkCount(t)
	t.Run("URL of exactly 2048 bytes", func(t *testing.T) {
		target := urlOfLength(2048)
		l := n.createURL(t, target)
		n.requireRedirect(t, l.ShortCode, target)
	})
	t.Run("body just under 64 KiB", func(t *testing.T) {
		if r := n.postJSON(t, "/api/v1/urls", jsonOfSize(60<<10)); r.status != http.StatusCreated {
			t.Errorf("60 KiB body: want 201, got %v", r)
		}
	})
	accepted := n.linkCount(t) - before

	tooLarge := []struct {
		name        string
		contentType string
		body        []byte
	}{
		{"URL of 2049 bytes", "application/json", mustJSON(t, map[string]any{"original_url": urlOfLength(2049)})},
		{"URL of 10000 bytes", "application/json", mustJSON(t, map[string]any{"original_url": urlOfLength(10000)})},
		{"form URL of 2049 bytes", "application/x-www-form-urlencoded", []byte(url.Values{"url": {urlOfLength(2049)}}.Encode())},
		{"body of 64 KiB + 1", "application/json", jsonOfSize(64<<10 + 1)},
		{"body of 1 MB", "application/json", jsonOfSize(1 << 20)},
	}
	for _, tc := range tooLarge {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{"Content-Type": {tc.contentType}}
			expectContinue(header, tc.body)
			r, continued, err := postTraced(n, "/api/v1/urls", header, tc.body)
			if err != nil {
				// A server that says "100 Continue" to a body it will
				// refuse, then closes mid-upload, resets the client.
				t.Fatalf("no 413 answer, the connection was cut (server sent 100 Continue: %v): %v", continued, err)
			}
			requireProblem(t, r, http.StatusRequestEntityTooLarge)
		})
	}
	// Clients that send a large body without asking first may see the
	// connection cut instead of the 413, but never a stored link or a 5xx.
	for _, size := range []int{64<<10 + 1, 1 << 20} {
		t.Run("body of "+itoa(size)+" bytes without Expect", func(t *testing.T) {
			r, err := n.tryRequest(t, http.MethodPost, "/api/v1/urls", http.Header{"Content-Type": {"application/json"}}, jsonOfSize(size))
			if err != nil {
				t.Logf("connection cut instead of a 413: %v", err)
				return
			}
			requireProblem(t, r, http.StatusRequestEntityTooLarge)
		})
	}
	if after := n.linkCount(t); after != before+accepted {
		t.Errorf("oversized requests changed the link count: %d before, %d accepted, %d after", before, accepted, after)
	}
}

// expectContinue asks before sending a body over the 64 KiB limit, as curl
// does for large bodies: the server can answer 413 before the body is on the
// wire. Without it a server that refuses early may cut the connection while
// the client still writes, and Go's client then reports the broken pipe
// instead of the answer.
func expectContinue(header http.Header, body []byte) {
	if len(body) > 64<<10 {
		header.Set("Expect", "100-continue")
	}
}

// postTraced posts body and reports whether the server answered an Expect:
// 100-continue with "100 Continue" before its final answer.
func postTraced(n *node, path string, header http.Header, body []byte) (response, bool, error) {
	var continued atomic.Bool
	trace := &httptrace.ClientTrace{Got100Continue: func() { continued.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
		http.MethodPost, "http://"+n.httpAddr+path, bytes.NewReader(body))
	if err != nil {
		return response{}, false, err
	}
	req.Header = header.Clone()
	n.authorize(req, header)
	resp, err := n.client.Do(req)
	if err != nil {
		return response{}, continued.Load(), err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: data}, continued.Load(), err
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBadInputIsRejected feeds the create endpoints malformed and hostile
// input: each gets its 4xx with a problem+json detail, nothing is stored and
// the node keeps serving (bad input is never a 5xx).
func TestBadInputIsRejected(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	const (
		jsonType = "application/json"
		formType = "application/x-www-form-urlencoded"
	)
	withURL := func(u string) []byte { return mustJSON(t, map[string]any{"original_url": u}) }
	withFields := func(raw string) []byte { return []byte(`{"original_url": "https://example.com/x", ` + raw + `}`) }
	past := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	tooFar := time.Now().UTC().AddDate(101, 0, 0).Format(time.RFC3339)
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.RFC3339)

	tests := []struct {
		name        string
		path        string // default /api/v1/urls
		contentType string
		body        []byte
		want        int
	}{
		// Malformed JSON and missing URL.
		{name: "truncated JSON", contentType: jsonType, body: []byte(`{"original_url": "https://example.com/"`), want: 400},
		{name: "unquoted key", contentType: jsonType, body: []byte(`{original_url: "https://example.com/"}`), want: 400},
		{name: "trailing garbage", contentType: jsonType, body: []byte(`{"original_url": "https://example.com/"} xyz`), want: 400},
		{name: "JSON array", contentType: jsonType, body: []byte(`[]`), want: 400},
		{name: "JSON string", contentType: jsonType, body: []byte(`"https://example.com/"`), want: 400},
		{name: "JSON null", contentType: jsonType, body: []byte(`null`), want: 400},
		{name: "empty body", contentType: jsonType, body: []byte{}, want: 400},
		{name: "empty object", contentType: jsonType, body: []byte(`{}`), want: 400},
		{name: "empty URL", contentType: jsonType, body: withURL(""), want: 400},
		{name: "blank URL", contentType: jsonType, body: withURL("   "), want: 400},
		{name: "URL is a number", contentType: jsonType, body: []byte(`{"original_url": 123}`), want: 400},
		{name: "URL is null", contentType: jsonType, body: []byte(`{"url": null}`), want: 400},
		{name: "invalid UTF-8", contentType: jsonType, body: []byte("{\"original_url\": \"https://example.com/\xff\xfe\"}"), want: 400},

		// Control characters and spaces inside the URL (trimming only
		// removes them at the ends).
		{name: "NUL in URL", contentType: jsonType, body: withURL("https://example.com/a\x00b"), want: 400},
		{name: "newline in URL", contentType: jsonType, body: withURL("https://example.com/a\nb"), want: 400},
		{name: "tab in URL", contentType: jsonType, body: withURL("https://example.com/a\tb"), want: 400},
		{name: "DEL in URL", contentType: jsonType, body: withURL("https://example.com/a\x7fb"), want: 400},
		{name: "space in path", contentType: jsonType, body: withURL("https://example.com/a b"), want: 400},
		{name: "space in host", contentType: jsonType, body: withURL("https://exa mple.com/"), want: 400},

		// Schemes and shapes that are not absolute http(s) URLs.
		{name: "javascript:", contentType: jsonType, body: withURL("javascript:alert(1)"), want: 400},
		{name: "JAVASCRIPT: upper case", contentType: jsonType, body: withURL("JAVASCRIPT:alert(document.cookie)"), want: 400},
		{name: "data:", contentType: jsonType, body: withURL("data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="), want: 400},
		{name: "file:", contentType: jsonType, body: withURL("file:///etc/passwd"), want: 400},
		{name: "ftp:", contentType: jsonType, body: withURL("ftp://example.com/file.txt"), want: 400},
		{name: "vbscript:", contentType: jsonType, body: withURL("vbscript:msgbox(1)"), want: 400},
		{name: "view-source:", contentType: jsonType, body: withURL("view-source:https://example.com/"), want: 400},
		{name: "gopher:", contentType: jsonType, body: withURL("gopher://example.com/"), want: 400},
		{name: "ws:", contentType: jsonType, body: withURL("ws://example.com/socket"), want: 400},
		{name: "no scheme", contentType: jsonType, body: withURL("example.com/path"), want: 400},
		{name: "scheme-relative", contentType: jsonType, body: withURL("//example.com/path"), want: 400},
		{name: "not a URL", contentType: jsonType, body: withURL("not a url"), want: 400},
		{name: "no host", contentType: jsonType, body: withURL("http://"), want: 400},
		{name: "empty host with path", contentType: jsonType, body: withURL("http:///path"), want: 400},
		{name: "port without host", contentType: jsonType, body: withURL("http://:80/"), want: 400},
		{name: "non-numeric port", contentType: jsonType, body: withURL("http://example.com:abc/"), want: 400},
		{name: "port out of range", contentType: jsonType, body: withURL("http://example.com:99999/"), want: 400},
		{name: "userinfo with password", contentType: jsonType, body: withURL("http://u:p@example.com/"), want: 400},
		{name: "userinfo user only", contentType: jsonType, body: withURL("https://user@example.com/"), want: 400},

		// Other fields.
		{name: "workspace with space", contentType: jsonType, body: withFields(`"workspace": "bad ws"`), want: 400},
		{name: "workspace of 65 characters", contentType: jsonType, body: withFields(`"workspace": "` + strings.Repeat("w", 65) + `"`), want: 400},
		{name: "workspace path traversal", contentType: jsonType, body: withFields(`"workspace": "../etc"`), want: 400},
		{name: "workspace is a number", contentType: jsonType, body: withFields(`"workspace": 7`), want: 400},
		{name: "bad workspace in path", path: "/api/v1/workspaces/bad%20ws/links", contentType: jsonType, body: []byte(`{"url": "https://example.com/x"}`), want: 400},
		{name: "unknown strategy", contentType: jsonType, body: withFields(`"strategy": "md5"`), want: 400},
		{name: "dedupe is a string", contentType: jsonType, body: withFields(`"dedupe": "yes"`), want: 400},
		{name: "custom code is a number", contentType: jsonType, body: withFields(`"custom_code": 12345`), want: 400},

		// Absurd expiry values.
		{name: "expires_in_seconds 0", contentType: jsonType, body: withFields(`"expires_in_seconds": 0`), want: 400},
		{name: "expires_in_seconds negative", contentType: jsonType, body: withFields(`"expires_in_seconds": -5`), want: 400},
		{name: "expires_in_seconds over 100 years", contentType: jsonType, body: withFields(`"expires_in_seconds": 3153600001`), want: 400},
		{name: "expires_in_seconds 1e30", contentType: jsonType, body: withFields(`"expires_in_seconds": 1e30`), want: 400},
		{name: "expires_in_seconds past int64", contentType: jsonType, body: withFields(`"expires_in_seconds": 9223372036854775808`), want: 400},
		{name: "expires_in_seconds fraction", contentType: jsonType, body: withFields(`"expires_in_seconds": 1.5`), want: 400},
		{name: "expires_in_seconds string", contentType: jsonType, body: withFields(`"expires_in_seconds": "60"`), want: 400},
		{name: "expires_in_seconds bool", contentType: jsonType, body: withFields(`"expires_in_seconds": true`), want: 400},
		{name: "expires_in_hours 0", contentType: jsonType, body: withFields(`"expires_in_hours": 0`), want: 400},
		{name: "expires_in_hours negative", contentType: jsonType, body: withFields(`"expires_in_hours": -2`), want: 400},
		{name: "expires_in_hours over 100 years", contentType: jsonType, body: withFields(`"expires_in_hours": 876001`), want: 400},
		{name: "expires_in_hours fraction", contentType: jsonType, body: withFields(`"expires_in_hours": 0.5`), want: 400},
		{name: "expires_at in the past", contentType: jsonType, body: withFields(`"expires_at": "` + past + `"`), want: 400},
		{name: "expires_at over 100 years ahead", contentType: jsonType, body: withFields(`"expires_at": "` + tooFar + `"`), want: 400},
		{name: "expires_at year 9999", contentType: jsonType, body: withFields(`"expires_at": "9999-12-31T23:59:59Z"`), want: 400},
		{name: "expires_at not RFC 3339", contentType: jsonType, body: withFields(`"expires_at": "2030-01-01"`), want: 400},
		{name: "expires_at words", contentType: jsonType, body: withFields(`"expires_at": "tomorrow"`), want: 400},
		{name: "expires_at number", contentType: jsonType, body: withFields(`"expires_at": 1900000000`), want: 400},
		{name: "seconds and hours", contentType: jsonType, body: withFields(`"expires_in_seconds": 60, "expires_in_hours": 1`), want: 400},
		{name: "seconds and expires_at", contentType: jsonType, body: withFields(`"expires_in_seconds": 60, "expires_at": "` + tomorrow + `"`), want: 400},

		// Content types other than JSON and form encoding.
		{name: "text/plain", contentType: "text/plain", body: withURL("https://example.com/plain"), want: 415},
		{name: "no content type", contentType: "", body: withURL("https://example.com/none"), want: 415},
		{name: "application/xml", contentType: "application/xml", body: []byte(`<url>https://example.com/</url>`), want: 415},
		{name: "multipart", contentType: "multipart/form-data; boundary=x", body: []byte("--x\r\nContent-Disposition: form-data; name=\"url\"\r\n\r\nhttps://example.com/\r\n--x--\r\n"), want: 415},

		// Form posts and the short form.
		{name: "form javascript:", contentType: formType, body: []byte("url=javascript%3Aalert(1)"), want: 400},
		{name: "form empty url", contentType: formType, body: []byte("url="), want: 400},
		{name: "form without url", contentType: formType, body: []byte("foo=bar"), want: 400},
		{name: "form invalid UTF-8", contentType: formType, body: []byte("url=https%3A%2F%2Fexample.com%2F%FF%FE"), want: 400},
		{name: "shorten ftp:", path: "/shorten", contentType: jsonType, body: []byte(`{"url": "ftp://example.com/"}`), want: 400},
		{name: "shorten malformed", path: "/shorten", contentType: jsonType, body: []byte(`{"url": `), want: 400},

		{name: "1 MB body", contentType: jsonType, body: append(append([]byte(`{"original_url": "https://example.com/`), bytes.Repeat([]byte("a"), 1<<20)...), `"}`...), want: 413},
	}

	before := n.linkCount(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = "/api/v1/urls"
			}
			header := http.Header{}
			if tc.contentType != "" {
				header.Set("Content-Type", tc.contentType)
			}
			expectContinue(header, tc.body)
			requireProblem(t, n.request(t, http.MethodPost, path, header, tc.body), tc.want)
		})
	}

	h := n.health(t)
	if h.Status != "healthy" || h.Links != before {
		t.Errorf("after the bad input /health = %+v; want healthy and links still %d", h, before)
	}
	l := n.createURL(t, "https://example.com/still-works")
	n.requireRedirect(t, l.ShortCode, "https://example.com/still-works")
}
