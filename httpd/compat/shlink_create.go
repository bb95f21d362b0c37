package compat

import (
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
)

// shlinkTitleLen is the length Shlink crops a title to
// (ShortUrlCreation's SubstringConverter(512)), linkraft's own
// fsm.MaxTitleLen. linkraft also keeps at most fsm.MaxTitleBytes bytes, a
// bound every node of a cluster checks, so a title of 512 characters
// beyond it is cropped further (docs/COMPATIBILITY.md).
const shlinkTitleLen = 512

// shlinkCodeLength is the length of the codes Shlink generates when a
// create asks for none (DEFAULT_SHORT_CODES_LENGTH), which a create with a
// pathPrefix but no slug gets after its prefix.
const shlinkCodeLength = 5

// errPastValidUntil refuses a validUntil in the past, which Shlink takes
// (the link is disabled from the start), while some server of the cluster
// runs a build that would purge such a link a day later (Native's
// AllowPastExpiry; docs/COMPATIBILITY.md).
var errPastValidUntil = refusal{"validUntil", "validUntil is in the past: this cluster keeps no disabled links until its upgrade is finished"}

// pastValidUntil reports whether a Shlink validUntil is a date already
// past: the link it makes or edits is disabled.
func pastValidUntil(s string) bool {
	at, err := time.Parse(time.RFC3339, s)
	return err == nil && !at.After(time.Now())
}

// shlinkCreate is Shlink's create body.
type shlinkCreate struct {
	LongURL         *string            `json:"longUrl"`
	CustomSlug      *string            `json:"customSlug"`
	PathPrefix      *string            `json:"pathPrefix"`
	Tags            []string           `json:"tags"`
	Title           *string            `json:"title"`
	ValidSince      *string            `json:"validSince"`
	ValidUntil      *string            `json:"validUntil"`
	MaxVisits       *int64             `json:"maxVisits"`
	FindIfExists    bool               `json:"findIfExists"`
	Domain          *string            `json:"domain"`
	ShortCodeLength *int64             `json:"shortCodeLength"`
	ForwardQuery    *bool              `json:"forwardQuery"`
	Crawlable       bool               `json:"crawlable"`
	ValidateURL     *bool              `json:"validateUrl"` // Shlink 3 ignores it, and so does linkraft
	DeviceLongURLs  map[string]*string `json:"deviceLongUrls"`
}

// shortenKey marks a one-call create sent without its apiKey parameter.
const shortenKey = "shlink.shorten.nokey"

// codeToMake is a code the adapter makes up because Shlink's create asked
// for what linkraft's generator does not do: a prefix, a length. length 0:
// linkraft generates the code.
type codeToMake struct {
	prefix string
	length int
}

// shlinkSlug is a custom slug or path prefix as Shlink takes it (without
// multi-segment slugs): spaces and slashes become '-', and URL-reserved
// characters are refused.
func shlinkSlug(s string) (string, bool) {
	s = strings.NewReplacer(" ", "-", "/", "-").Replace(s)
	return s, !strings.ContainsAny(s, ":?#[]@")
}

// shlinkTags are tags as Shlink normalises them: trimmed, lowercase,
// spaces as '-', without empty ones or repeats.
func shlinkTags(tags []string) []string {
	out := []string{}
	for _, t := range tags {
		t = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(t)), " ", "-")
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// shlinkTitle is a title as Shlink keeps it: trimmed and cropped to 512
// characters, then to whole characters within fsm.MaxTitleBytes.
func shlinkTitle(t string) string {
	t = strings.TrimSpace(t)
	limit := min(shlinkTitleLen, fsm.MaxTitleLen)
	if utf8.RuneCountInString(t) > limit {
		t = string([]rune(t)[:limit])
	}
	for len(t) > fsm.MaxTitleBytes {
		_, size := utf8.DecodeLastRuneInString(t)
		t = t[:len(t)-size]
	}
	return strings.TrimSpace(t)
}

// nativeCreate is the body of linkraft's create for a Shlink create, and
// the code the adapter must make up for it. Its error names every invalid
// field (invalidFields) or what linkraft cannot do (refusal); pastOK says
// whether a past validUntil is taken (Native's AllowPastExpiry).
func (c *shlinkCreate) nativeCreate(defaultDomain string, pastOK bool) (map[string]any, codeToMake, error) {
	var bad invalidFields
	long := ""
	if c.LongURL != nil {
		long = strings.TrimSpace(*c.LongURL)
	}
	if long == "" {
		bad = append(bad, "longUrl")
	}
	body := map[string]any{"url": long}
	code, gen := c.code(&bad)
	if code != "" {
		body["custom_code"] = code
	}
	c.dates(body, &bad)
	if c.MaxVisits != nil && *c.MaxVisits < 1 {
		bad = append(bad, "maxVisits")
	}
	if len(bad) > 0 {
		return nil, gen, bad
	}
	if err := c.refusal(pastOK); err != nil {
		return nil, gen, err
	}
	c.options(body, defaultDomain)
	return body, gen, nil
}

// code is the custom code the create asks for (its path prefix and slug),
// or the code the adapter must make up (a prefix, a length); bad gets the
// fields Shlink refuses.
func (c *shlinkCreate) code(bad *invalidFields) (string, codeToMake) {
	var gen codeToMake
	slug := ""
	if c.CustomSlug != nil && *c.CustomSlug != "" {
		var ok bool
		if slug, ok = shlinkSlug(*c.CustomSlug); !ok {
			*bad = append(*bad, "customSlug")
		}
	}
	if c.PathPrefix != nil && *c.PathPrefix != "" {
		var ok bool
		if gen.prefix, ok = shlinkSlug(*c.PathPrefix); !ok {
			*bad = append(*bad, "pathPrefix")
		}
	}
	n := c.ShortCodeLength
	if n != nil && (*n < 4 || *n > 64) {
		*bad = append(*bad, "shortCodeLength") // Shlink's least is 4
	}
	switch {
	case slug != "":
		return gen.prefix + slug, codeToMake{}
	case n != nil:
		gen.length = int(*n)
	case gen.prefix != "":
		gen.length = shlinkCodeLength
	} // else linkraft generates the code
	return "", gen
}

// dates adds the create's validSince and validUntil to body; bad gets
// those that are not ISO 8601 dates such as 2030-01-02T15:04:05+00:00.
func (c *shlinkCreate) dates(body map[string]any, bad *invalidFields) {
	for _, t := range []struct {
		name, field string
		v           *string
	}{{"validSince", "valid_since", c.ValidSince}, {"validUntil", "expires_at", c.ValidUntil}} {
		if t.v == nil || *t.v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, *t.v)
		if err != nil {
			*bad = append(*bad, t.name)
			continue
		}
		body[t.field] = nativeTime(at)
	}
}

// refusal is what a valid Shlink create asks for that linkraft refuses.
func (c *shlinkCreate) refusal(pastOK bool) error {
	if c.pastValidUntil() && !pastOK {
		return errPastValidUntil
	}
	if slices.ContainsFunc([]*string{c.DeviceLongURLs["android"], c.DeviceLongURLs["ios"], c.DeviceLongURLs["desktop"]},
		func(s *string) bool { return s != nil && *s != "" }) {
		return refusal{"deviceLongUrls", "deviceLongUrls are not supported by this API: set linkraft rules with a device condition instead"}
	}
	return nil
}

// pastValidUntil reports whether the create's validUntil is already past.
func (c *shlinkCreate) pastValidUntil() bool {
	return c.ValidUntil != nil && pastValidUntil(*c.ValidUntil)
}

// options adds the rest of the create to body, as linkraft takes it.
func (c *shlinkCreate) options(body map[string]any, defaultDomain string) {
	if c.Crawlable {
		body["crawlable"] = true
	}
	if tags := shlinkTags(c.Tags); len(tags) > 0 {
		body["tags"] = tags
	}
	if c.Title != nil {
		if t := shlinkTitle(*c.Title); t != "" {
			body["title"] = t
		}
	}
	if c.MaxVisits != nil {
		body["max_visits"] = *c.MaxVisits
	}
	if c.FindIfExists {
		body["dedupe"] = true
	}
	if d := c.domain(defaultDomain); d != "" {
		body["domain"] = d
	}
	// Shlink forwards the query by default, and its client leaves false
	// fields out of a create: absent means true.
	body["forward_query"] = c.ForwardQuery == nil || *c.ForwardQuery
}

// domain is the create's domain, "" for the default one (Shlink drops the
// default domain's own name from a request).
func (c *shlinkCreate) domain(defaultDomain string) string {
	if c.Domain == nil || strings.EqualFold(*c.Domain, defaultDomain) {
		return ""
	}
	return *c.Domain
}

func (sh shlink) create(ctx *fasthttp.RequestCtx) {
	var c shlinkCreate
	if err := decodeShlink(ctx.PostBody(), &c); err != nil {
		failBody(ctx, err)
		return
	}
	sh.createFrom(ctx, &c, false)
}

// shorten is Shlink's one-call create, for scripts: GET with apiKey and
// longUrl, the ShortUrl back (format=txt: the short URL alone).
func (sh shlink) shorten(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	if key := args.Peek("apiKey"); len(key) > 0 {
		useKey(ctx, string(key))
	} else {
		ctx.SetUserValue(shortenKey, true) // a refusal names the apiKey parameter
	}
	long := string(args.Peek("longUrl"))
	sh.createFrom(ctx, &shlinkCreate{LongURL: &long}, string(args.Peek("format")) == "txt")
}

func (sh shlink) createFrom(ctx *fasthttp.RequestCtx, c *shlinkCreate, text bool) {
	defaultDomain := sh.n.DefaultDomain(ctx)
	// Asked for any validUntil, not only one past here: a date that passes
	// before the native create reads it is taken too.
	pastOK := c.ValidUntil != nil && *c.ValidUntil != "" && sh.n.AllowPastExpiry(ctx)
	body, gen, err := c.nativeCreate(defaultDomain, pastOK)
	if err != nil {
		failInvalid(ctx, err)
		return
	}
	a := sh.callCreate(ctx, body, gen)
	if a.Status == fasthttp.StatusForbidden {
		// Shlink creates a domain-limited key's links on its domain,
		// whatever the request names (OverrideDomainMiddleware).
		if d, ok := sh.keyDomain(ctx, body); ok {
			body["domain"] = d
			a = sh.callCreate(ctx, body, gen)
		}
	}
	if !a.OK() {
		slug, _ := body["custom_code"].(string)
		failShlink(ctx, a, slug, c.domain(defaultDomain))
		return
	}
	var l Link
	if err := a.Decode(&l); err != nil {
		problemShlink(ctx, fasthttp.StatusInternalServerError, "about:blank", "Internal error", err.Error(), nil)
		return
	}
	if l.Existing { // findIfExists found it: show its clicks too
		if r := sh.n.Call(ctx, "GET", linkPath(l.ShortCode, l.Domain, ""), nil); r.OK() {
			_ = r.Decode(&l)
		}
	}
	if text {
		writeBody(ctx, fasthttp.StatusOK, "text/plain", []byte(l.ShortURL))
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(shortURLOf(&l)))
}

// keyDomain is the domain of the request's key when it is limited to
// domains the create does not name: its first. false when the key is not
// limited, or the create names one of its domains (so the refusal is for
// another reason).
func (sh shlink) keyDomain(ctx *fasthttp.RequestCtx, body map[string]any) (string, bool) {
	domains := sh.keyDomains(ctx)
	asked, _ := body["domain"].(string)
	if len(domains) == 0 || slices.Contains(domains, asked) {
		return "", false
	}
	return domains[0], true
}

// callCreate runs linkraft's create; a code the adapter makes up is tried
// again, new, while it is taken, as Shlink's ShortCodeUniquenessHelper
// does.
func (sh shlink) callCreate(ctx *fasthttp.RequestCtx, body map[string]any, gen codeToMake) Answer {
	if gen.length == 0 {
		return sh.n.Call(ctx, "POST", "/api/v1/urls", body)
	}
	var a Answer
	for range 8 {
		body["custom_code"] = gen.prefix + randomCode(gen.length)
		if a = sh.n.Call(ctx, "POST", "/api/v1/urls", body); a.Status != fasthttp.StatusConflict {
			break
		}
	}
	return a
}

// randomCode is n random letters and digits, the alphabet of Shlink's
// generated codes.
func randomCode(n int) string {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it crashes the program first)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// conflictDetail is Shlink's detail for a slug in use.
func conflictDetail(slug, domain string) string {
	if domain == "" {
		return fmt.Sprintf("Provided slug %q is already in use.", slug)
	}
	return fmt.Sprintf("Provided slug %q is already in use for domain %q.", slug, domain)
}
