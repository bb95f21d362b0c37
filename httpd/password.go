package httpd

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"golang.org/x/crypto/bcrypt"
)

// Link passwords: how long they may be, and what bcrypt spends on each.
const (
	minLinkPassword = 8   // characters
	maxLinkPassword = 128 // characters
	// linkPasswordCost is bcrypt's work factor: tens of milliseconds of
	// one core per check, which the guess limiter keeps from being spent
	// at will.
	linkPasswordCost = 10
)

// checkPasswordRule reports whether pw is a password a link may have.
func checkPasswordRule(pw string) error {
	if n := utf8.RuneCountInString(pw); n < minLinkPassword || n > maxLinkPassword {
		return fmt.Errorf("a link password has %d to %d characters, not %d", minLinkPassword, maxLinkPassword, n)
	}
	return nil
}

// hashLinkPassword is the bcrypt hash a link stores for pw. It refuses a
// password that breaks the rule, so no path stores one.
func hashLinkPassword(pw string) (string, error) {
	if err := checkPasswordRule(pw); err != nil {
		return "", err
	}
	h, err := bcrypt.GenerateFromPassword(preHashPassword(pw), linkPasswordCost)
	if err != nil {
		return "", fmt.Errorf("hashing the link password: %w", err)
	}
	return string(h), nil
}

// linkPasswordMatches reports whether pw is the password hashed in hash.
// bcrypt compares in constant time.
func linkPasswordMatches(hash, pw string) bool {
	if hash == "" {
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), preHashPassword(pw)) == nil
}

// preHashPassword is what bcrypt is given for pw: bcrypt reads at most 72
// bytes (Go's refuses more), and 128 characters may be 512 bytes, so it
// gets SHA-256 of pw instead. The digest is base64-encoded (44 bytes)
// because some bcrypt implementations stop at a NUL byte, which a raw
// digest may hold; this keeps the stored hashes portable.
func preHashPassword(pw string) []byte {
	sum := sha256.Sum256([]byte(pw))
	out := make([]byte, base64.StdEncoding.EncodedLen(len(sum)))
	base64.StdEncoding.Encode(out, sum[:])
	return out
}

// maxPasswordForm is the largest form body read for a password: a 128
// character password is at most 512 bytes, 1.5 KiB percent-encoded.
const maxPasswordForm = 4 << 10

// linkPasswordHeader carries a link's password for clients without forms.
const linkPasswordHeader = "X-Link-Password"

// submittedPassword is the password a request offers for a link: the
// X-Link-Password header, else the "password" field of a POSTed form. An
// empty one is no password.
func submittedPassword(ctx *fasthttp.RequestCtx) (string, bool) {
	if pw := ctx.Request.Header.Peek(linkPasswordHeader); len(pw) > 0 {
		return string(pw), true
	}
	if !ctx.IsPost() || !isFormURLEncoded(ctx.Request.Header.ContentType()) {
		return "", false
	}
	if ctx.Request.Header.ContentLength() > maxPasswordForm || len(ctx.PostBody()) > maxPasswordForm {
		return "", false
	}
	// Parsed here rather than by PostArgs, which knows the media type only
	// in lower case.
	args := fasthttp.AcquireArgs()
	defer fasthttp.ReleaseArgs(args)
	args.ParseBytes(ctx.PostBody())
	pw := args.Peek("password")
	return string(pw), len(pw) > 0
}

// isFormURLEncoded reports whether a Content-Type is a URL-encoded form,
// whatever its parameters (charset).
func isFormURLEncoded(ct []byte) bool {
	mt, _ := cutByte(ct, ';')
	mt = bytes.TrimSpace(mt)
	return len(mt) == len("application/x-www-form-urlencoded") &&
		asciiEqualFold(mt, "application/x-www-form-urlencoded")
}

// The details an API client is answered with. They are fixed, unlike the
// page's wording, because clients match on them.
const (
	passwordNeededDetail  = "this link is protected by a password: send it in " + linkPasswordHeader
	passwordWrongDetail   = "wrong password"
	passwordLimitedDetail = "too many wrong passwords"
	// passwordWrongMessage is the page's line after a wrong password.
	passwordWrongMessage = "Wrong password"
)

// passwordPageCSP allows the page nothing but its inline style and posting
// its form back to this origin.
const passwordPageCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'"

// writePasswordForm asks for a link's password: a browser gets a page with
// a form, an API client a problem. status is 401 to ask (message "") or
// after a wrong password (passwordWrongMessage), 429 when guesses are
// limited (see writePasswordLimited). message is shown on the page.
func writePasswordForm(ctx *fasthttp.RequestCtx, code string, status int, message string) {
	if wantsHTML(ctx) {
		writePasswordPage(ctx, code, status, message)
	} else {
		writeProblem(ctx, status, passwordDetail(status, message))
	}
	h := &ctx.Response.Header
	h.Set(fasthttp.HeaderCacheControl, cacheControlNoStore)
	h.Set(fasthttp.HeaderXContentTypeOptions, "nosniff")
	h.Set(fasthttp.HeaderReferrerPolicy, "no-referrer")
}

// writePasswordLimited answers a guess the limiter refused.
func writePasswordLimited(ctx *fasthttp.RequestCtx, code string, retryAfter int) {
	msg := "Too many attempts. Try again in " + strconv.Itoa(retryAfter) + " seconds."
	writePasswordForm(ctx, code, fasthttp.StatusTooManyRequests, msg)
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(retryAfter))
}

func passwordDetail(status int, message string) string {
	switch {
	case status == fasthttp.StatusTooManyRequests:
		return passwordLimitedDetail
	case message == "":
		return passwordNeededDetail
	}
	return passwordWrongDetail
}

// writePasswordPage writes the form. It has no action, so it posts to the
// URL it was served at, query included (forward_query still applies), and
// it loads nothing: its CSP forbids all but the inline style.
func writePasswordPage(ctx *fasthttp.RequestCtx, code string, status int, message string) {
	ctx.Response.Reset()
	ctx.SetStatusCode(status)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set(fasthttp.HeaderContentSecurityPolicy, passwordPageCSP)
	title := html.EscapeString(http.StatusText(status))
	var notice string
	if message != "" {
		notice = `<p role="alert">` + html.EscapeString(message) + `</p>`
	}
	ctx.SetBodyString(`<!doctype html><html lang="en"><head><meta charset="utf-8">` +
		`<meta name="viewport" content="width=device-width,initial-scale=1">` +
		`<meta name="robots" content="noindex"><title>` + title + `</title>` +
		`<style>body{font:16px/1.5 system-ui,sans-serif;max-width:30em;margin:4em auto;padding:0 1em}` +
		`input,button{font:inherit;padding:.4em}[role=alert]{color:#b00020}</style></head><body>` +
		`<h1>Password required</h1><p>The link <code>` + html.EscapeString(code) +
		`</code> is protected by a password.</p>` + notice +
		`<form method="post"><label>Password <input type="password" name="password" required ` +
		`minlength="` + strconv.Itoa(minLinkPassword) + `" maxlength="` + strconv.Itoa(maxLinkPassword) +
		`" autocomplete="current-password" autofocus></label> <button type="submit">Open</button></form>` +
		`</body></html>`)
}

// Default guess budgets. A client's bucket is checked before the link's,
// so one client alone spends its own 5 and never the link's 20: only many
// clients together can hold a link's owner back, and they then guess at
// most 60 a minute, which is the bound on guessing with a botnet.
const (
	clientGuessesPerMinute = 10
	clientGuessBurst       = 5
	linkGuessesPerMinute   = 60
	linkGuessBurst         = 20
)

// guessLimiter limits password guesses per client (IPv4 address, IPv6 /64:
// see bucketKey) and per link (qualified code), before bcrypt runs, so a
// flood of guesses costs no CPU. Every attempt counts, right or wrong: it
// is judged before its password is checked.
type guessLimiter struct {
	now func() time.Time // time.Now; tests stop the clock

	mu      sync.Mutex
	clients buckets[netip.Addr]
	links   buckets[string]
	done    chan struct{}
	once    sync.Once
}

func newGuessLimiter(perClient, perLink budget) *guessLimiter {
	l := &guessLimiter{
		now:     time.Now,
		clients: newBuckets[netip.Addr](perClient),
		links:   newBuckets[string](perLink),
		done:    make(chan struct{}),
	}
	go l.sweep()
	return l
}

// newDefaultGuessLimiter is a guessLimiter with the default budgets.
func newDefaultGuessLimiter() *guessLimiter {
	return newGuessLimiter(budget{clientGuessesPerMinute, clientGuessBurst},
		budget{linkGuessesPerMinute, linkGuessBurst})
}

// allow takes a guess from client's budget and from code's, or from
// neither: then it returns how many whole seconds to wait.
func (l *guessLimiter) allow(client netip.Addr, code string) (retryAfter int, ok bool) {
	now := l.now()
	// Held throughout, so a sweep never drops a bucket a guess is being
	// taken from: that guess would be forgotten.
	l.mu.Lock()
	defer l.mu.Unlock()
	cb, cok := l.clients.get(bucketKey(client))
	lb, lok := l.links.get(code)
	if !cok || !lok {
		return int(limiterSweepInterval / time.Second), false
	}
	cr, wait := take(cb, now)
	if wait > 0 {
		return wait, false
	}
	if _, wait = take(lb, now); wait > 0 {
		// The link is being guessed by others: this client's budget is
		// kept for its other links.
		if cr != nil {
			cr.CancelAt(now)
		}
		return wait, false
	}
	return 0, true
}

func (l *guessLimiter) sweep() {
	t := time.NewTicker(limiterSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case now := <-t.C:
			l.sweepAt(now)
		}
	}
}

// sweepAt drops the buckets that are full again at now: a new one would
// be the same.
func (l *guessLimiter) sweepAt(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clients.sweep(now)
	l.links.sweep(now)
}

func (l *guessLimiter) stop() { l.once.Do(func() { close(l.done) }) }
