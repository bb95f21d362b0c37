package httpd

import (
	"net/url"
	"testing"
)

// TestUnicodeCodes: a custom code of letters of any script or emoji is
// created, redirects when a browser asks for it percent-encoded, and is
// read, counted and renamed through the API under the same code; one in
// decomposed form (NFD) is refused, not stored as a look-alike.
func TestUnicodeCodes(t *testing.T) {
	s := newTestServer(t, nil)
	for _, code := range []string{"café", "日本語", "\U0001F9A3\U0001F9A3\U0001F9A3"} {
		t.Run(code, func(t *testing.T) {
			got := mustCreate(t, s, `{"url":"https://example.com/`+url.PathEscape(code)+`","custom_code":"`+code+`"}`)
			if got != code {
				t.Fatalf("created %q, want %q", got, code)
			}
			escaped := "/" + url.PathEscape(code)
			if ctx := do(s, "GET", escaped, "", ""); status(ctx) != 302 {
				t.Fatalf("GET %s: %d %s", escaped, status(ctx), ctx.Response.Body())
			}
			read := do(s, "GET", "/api/v1/urls"+escaped, "", "")
			if status(read) != 200 || body(t, read)["short_code"] != code {
				t.Fatalf("read %s: %d %s", escaped, status(read), read.Response.Body())
			}
			if ctx := do(s, "GET", "/api/v1/urls"+escaped+"/stats", "", ""); status(ctx) != 200 {
				t.Fatalf("stats %s: %d %s", escaped, status(ctx), ctx.Response.Body())
			}
		})
	}
	// Renamed to another script, the old one retired.
	if ctx := do(s, "PATCH", "/api/v1/urls/"+url.PathEscape("café"), "application/json", `{"short_code":"кафе"}`); status(ctx) != 200 {
		t.Fatalf("rename: %d %s", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/"+url.PathEscape("кафе"), "", ""); status(ctx) != 302 {
		t.Fatalf("the renamed code: %d", status(ctx))
	}
	if ctx := do(s, "GET", "/"+url.PathEscape("café"), "", ""); status(ctx) == 302 {
		t.Fatal("the old code still redirects")
	}
	// "café" with e and a combining accent: another code that looks the same.
	if ctx := do(s, "POST", "/api/v1/urls", "application/json", `{"url":"https://example.com/nfd","custom_code":"cafe\u0301s"}`); status(ctx) != 400 {
		t.Fatalf("a decomposed code: %d %s, want 400", status(ctx), ctx.Response.Body())
	}
}

// TestShlinkEmojiCodes follows Shlink test-api
// CreateShortUrlTest::canCreateShortUrlsWithEmojis: a slug of emoji is
// the short code, its short URL ends with it, and the link is read back
// by it.
func TestShlinkEmojiCodes(t *testing.T) {
	s := newTestServer(t, nil)
	const slug = "\U0001F9A3\U0001F9A3\U0001F9A3" // 🦣🦣🦣
	ctx := do(s, "POST", "/rest/v3/short-urls", "application/json", `{"longUrl":"https://emojipedia.org/fire/","customSlug":"`+slug+`"}`)
	m := body(t, ctx)
	if status(ctx) != 200 || m["shortCode"] != slug || m["shortUrl"] != "http://sho.rt/"+slug {
		t.Fatalf("create: %d %s", status(ctx), ctx.Response.Body())
	}
	if read := do(s, "GET", "/rest/v3/short-urls/"+url.PathEscape(slug), "", ""); status(read) != 200 || body(t, read)["shortCode"] != slug {
		t.Fatalf("read: %d %s", status(read), read.Response.Body())
	}
}
