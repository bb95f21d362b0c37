package compat

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Shlink's redirect rules, tag renames and deletions, and domain
// redirects, on linkraft's own rules, tags and domains.

// shlinkCondition is one condition of a Shlink redirect rule.
type shlinkCondition struct {
	Type       string  `json:"type"`
	MatchKey   *string `json:"matchKey"`
	MatchValue *string `json:"matchValue"`
}

// shlinkRule is a Shlink redirect rule; Priority only in answers.
type shlinkRule struct {
	LongURL    string            `json:"longUrl"`
	Priority   int               `json:"priority,omitempty"`
	Conditions []shlinkCondition `json:"conditions"`
}

// shlinkDevices are the devices of Shlink's device condition that
// linkraft's rules know; Shlink's operating systems (windows, macos,
// linux, chromeos) they do not.
var shlinkDevices = []string{"android", "ios", "mobile", "desktop"}

// shlinkBrowsers are Shlink's browsers linkraft tells apart
// (android_browser it does not).
var shlinkBrowsers = []string{"chrome", "firefox", "edge", "safari", "opera"}

func condition(typ string, key *string, value string) shlinkCondition {
	return shlinkCondition{Type: typ, MatchKey: key, MatchValue: &value}
}

// shlinkRulesOf is a link's rules as Shlink shows them. A linkraft rule
// with several addresses holds for any of them, and a Shlink rule holds
// only when all its conditions do: such a rule is shown as one Shlink rule
// per address, the same in all else, one after the other.
func shlinkRulesOf(rules []Rule) []shlinkRule {
	out := []shlinkRule{}
	for _, r := range rules {
		w := r.When
		var base []shlinkCondition
		if w.Device != "" {
			base = append(base, condition("device", nil, w.Device))
		}
		if w.Browser != "" {
			base = append(base, condition("browser", nil, w.Browser))
		}
		if w.Language != "" {
			base = append(base, condition("language", nil, w.Language))
		}
		for _, name := range slices.Sorted(maps.Keys(w.Query)) {
			base = append(base, condition("query-param", &name, w.Query[name]))
		}
		if w.Country != "" {
			base = append(base, condition("geolocation-country-code", nil, w.Country))
		}
		for _, t := range []struct{ typ, at string }{{"after-date", w.After}, {"before-date", w.Before}} {
			if t.at != "" {
				at, _ := time.Parse(time.RFC3339, t.at)
				base = append(base, condition(t.typ, nil, *shlinkTimeOf(at)))
			}
		}
		addresses := w.IP
		if len(addresses) == 0 {
			addresses = []string{""}
		}
		for _, a := range addresses {
			conds := slices.Clone(base)
			if a != "" {
				conds = append(conds, condition("ip-address", nil, a))
			}
			if conds == nil {
				conds = []shlinkCondition{}
			}
			out = append(out, shlinkRule{LongURL: r.URL, Priority: len(out) + 1, Conditions: conds})
		}
	}
	return out
}

// nativeRule is a Shlink rule as a linkraft rule: every condition
// linkraft can honour, and an error naming the first it cannot.
func nativeRule(r shlinkRule) (Rule, error) {
	out := Rule{URL: r.LongURL}
	for _, c := range r.Conditions {
		if err := addNativeCondition(&out.When, c); err != nil {
			return out, err
		}
	}
	return out, nil
}

// addNativeCondition adds Shlink's condition c to w, or says why
// linkraft's rules cannot hold it.
func addNativeCondition(w *RuleWhen, c shlinkCondition) error {
	value := ""
	if c.MatchValue != nil {
		value = *c.MatchValue
	}
	switch c.Type {
	case "device":
		if !slices.Contains(shlinkDevices, value) && !slices.Contains([]string{"windows", "macos", "linux", "chromeos"}, value) {
			return invalidFields{"redirectRules"} // no device Shlink has either
		}
		if !slices.Contains(shlinkDevices, value) {
			return fmt.Errorf("device condition %q: linkraft's rules know the devices %s", value, strings.Join(shlinkDevices, ", "))
		}
		return setOnce(&w.Device, value, c.Type)
	case "browser":
		if !slices.Contains(shlinkBrowsers, value) && value != "android_browser" {
			return invalidFields{"redirectRules"} // no browser Shlink has either
		}
		if !slices.Contains(shlinkBrowsers, value) {
			return fmt.Errorf("browser condition %q: linkraft's rules know the browsers %s", value, strings.Join(shlinkBrowsers, ", "))
		}
		return setOnce(&w.Browser, value, c.Type)
	case "language":
		return setOnce(&w.Language, value, c.Type)
	case "geolocation-country-code":
		return setOnce(&w.Country, value, c.Type)
	case "ip-address":
		// Shlink's conditions must all hold; linkraft's addresses
		// are alternatives: one address is the same in both.
		if len(w.IP) > 0 {
			return fmt.Errorf("a rule holds at most one ip-address condition here")
		}
		w.IP = []string{value}
		return nil
	case "query-param":
		return addQueryCondition(w, c.MatchKey, value)
	case "before-date", "after-date":
		return addDateCondition(w, c.Type, value)
	case "any-value-query-param", "valueless-query-param", "geolocation-city-name":
		return fmt.Errorf("linkraft's rules have no %s condition", c.Type)
	}
	return invalidFields{"redirectRules"} // no condition type Shlink has
}

// setOnce sets a condition linkraft's rules hold one of.
func setOnce(field *string, value, conditionType string) error {
	if *field != "" {
		return fmt.Errorf("a rule holds at most one %s condition here", conditionType)
	}
	*field = value
	return nil
}

// addQueryCondition adds a query-param condition: key must be value.
func addQueryCondition(w *RuleWhen, key *string, value string) error {
	if key == nil || *key == "" {
		return invalidFields{"redirectRules"} // a query-param condition needs its matchKey
	}
	if _, dup := w.Query[*key]; dup {
		return fmt.Errorf("two query-param conditions on %q", *key)
	}
	if w.Query == nil {
		w.Query = map[string]string{}
	}
	w.Query[*key] = value
	return nil
}

// addDateCondition adds a before-date or after-date condition.
func addDateCondition(w *RuleWhen, conditionType, value string) error {
	at, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return invalidFields{"redirectRules"} // an ISO 8601 date such as 2030-01-02T15:04:05+00:00
	}
	field := &w.Before
	if conditionType == "after-date" {
		field = &w.After
	}
	return setOnce(field, nativeTime(at), conditionType)
}

// redirectRules answers a link's rules as Shlink's redirect rules.
func (sh shlink) redirectRules(ctx *fasthttp.RequestCtx) {
	code, domain := sh.codeAndDomain(ctx)
	sh.writeRules(ctx, sh.n.Call(ctx, "GET", linkPath(code, domain, ""), nil), code, domain)
}

func (sh shlink) writeRules(ctx *fasthttp.RequestCtx, a Answer, code, domain string) {
	l, ok := linkOfShlink(ctx, a, code, domain)
	if !ok {
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{
		"defaultLongUrl": l.OriginalURL, "redirectRules": shlinkRulesOf(l.Rules),
	}))
}

// setRedirectRules replaces a link's rules with Shlink's, in their order.
func (sh shlink) setRedirectRules(ctx *fasthttp.RequestCtx) {
	code, domain := sh.codeAndDomain(ctx)
	var body struct {
		RedirectRules []shlinkRule `json:"redirectRules"`
	}
	if err := decodeShlink(ctx.PostBody(), &body); err != nil {
		failBody(ctx, err)
		return
	}
	rules := make([]Rule, 0, len(body.RedirectRules))
	for i, r := range body.RedirectRules {
		rule, err := nativeRule(r)
		var invalid invalidFields
		if err != nil && !errors.As(err, &invalid) { // what linkraft's rules cannot hold
			err = refusal{"redirectRules", fmt.Sprintf("redirectRules[%d]: %s", i, err)}
		}
		if err != nil {
			failInvalid(ctx, err)
			return
		}
		rules = append(rules, rule)
	}
	a := sh.n.Call(ctx, "PATCH", linkPath(code, domain, ""), map[string]any{"rules": rules})
	sh.writeRules(ctx, a, code, domain)
}

// renameTag is Shlink's tag rename: 204, 404 tag-not-found, 409
// tag-conflict, 403 forbidden-tag-operation for a key of a Shlink role.
func (sh shlink) renameTag(ctx *fasthttp.RequestCtx) {
	var body struct {
		OldName string `json:"oldName"`
		NewName string `json:"newName"`
	}
	if err := decodeShlink(ctx.PostBody(), &body); err != nil {
		failBody(ctx, err)
		return
	}
	var missing invalidFields
	for name, v := range map[string]string{"oldName": body.OldName, "newName": body.NewName} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		invalidShlink(ctx, missing...)
		return
	}
	if sh.forbidsTagOperations(ctx, "You are not allowed to rename tags") {
		return
	}
	a := sh.n.Call(ctx, "PUT", "/api/v1/tags/"+url.PathEscape(body.OldName), map[string]string{"name": body.NewName})
	switch a.Status {
	case fasthttp.StatusOK:
		ctx.Response.Reset()
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	case fasthttp.StatusNotFound:
		problemShlink(ctx, a.Status, shlinkError+"tag-not-found", "Tag not found",
			fmt.Sprintf("Tag with name %q could not be found", body.OldName), map[string]any{"tag": body.OldName})
	case fasthttp.StatusConflict:
		problemShlink(ctx, a.Status, shlinkError+"tag-conflict", "Tag conflict",
			fmt.Sprintf("You cannot rename tag %s to %s, because it already exists", body.OldName, body.NewName),
			map[string]any{"oldName": body.OldName, "newName": body.NewName})
	default:
		failShlink(ctx, a, "", "")
	}
}

// deleteTags is Shlink's tag deletion: each of ?tags[]= removed from the
// links the key may change, one tag after the other; a tag no such link
// carries is skipped, as Shlink skips tags it does not have.
func (sh shlink) deleteTags(ctx *fasthttp.RequestCtx) {
	tags := phpArray(ctx.QueryArgs(), "tags") // read before a native call rewrites the request
	if sh.forbidsTagOperations(ctx, "You are not allowed to delete tags") {
		return
	}
	for _, t := range tags {
		a := sh.n.Call(ctx, "DELETE", "/api/v1/tags/"+url.PathEscape(t), nil)
		if !a.OK() && a.Status != fasthttp.StatusNotFound {
			failShlink(ctx, a, "", "")
			return
		}
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// shlinkRedirects are a domain's redirects as Shlink shows them.
type shlinkRedirects struct {
	BaseURLRedirect         *string `json:"baseUrlRedirect"`
	Regular404Redirect      *string `json:"regular404Redirect"`
	InvalidShortURLRedirect *string `json:"invalidShortUrlRedirect"`
}

// nativeDomain is a domain as /admin/domains shows and takes it.
type nativeDomain struct {
	Domain           string `json:"domain,omitempty"`
	Default          bool   `json:"default,omitempty"`
	RootRedirect     string `json:"root_redirect,omitempty"`
	NotFoundRedirect string `json:"not_found_redirect,omitempty"`
	InvalidRedirect  string `json:"invalid_redirect,omitempty"`
}

func (d nativeDomain) redirects() shlinkRedirects {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return shlinkRedirects{opt(d.RootRedirect), opt(d.NotFoundRedirect), opt(d.InvalidRedirect)}
}

// nativeDomains is linkraft's domain list: the registered domains and
// the default domain's redirects. ok false: the key may not read it.
func (sh shlink) nativeDomains(ctx *fasthttp.RequestCtx) (list []nativeDomain, def nativeDomain, a Answer, ok bool) {
	a = sh.n.Call(ctx, "GET", "/admin/domains", nil)
	if !a.OK() {
		return nil, def, a, false
	}
	var body struct {
		Domains []nativeDomain `json:"domains"`
		Default nativeDomain   `json:"default"`
	}
	if err := a.Decode(&body); err != nil {
		return nil, def, Answer{Status: fasthttp.StatusInternalServerError}, false
	}
	return body.Domains, body.Default, a, true
}

// setDomainRedirects is Shlink's PATCH /domains/redirects: a redirect the
// body leaves out is kept, null removes it. The default domain's name sets
// the default domain's redirects; another name is registered if it is not
// yet. Setting domains takes an admin key, as linkraft's domains do.
func (sh shlink) setDomainRedirects(ctx *fasthttp.RequestCtx) {
	var body map[string]*string
	if err := decodeShlink(ctx.PostBody(), &body); err != nil {
		failBody(ctx, err)
		return
	}
	name := body["domain"]
	if name == nil || *name == "" {
		invalidShlink(ctx, "domain")
		return
	}
	list, def, a, ok := sh.nativeDomains(ctx)
	if !ok {
		failShlink(ctx, a, "", "")
		return
	}
	d := nativeDomain{Domain: strings.ToLower(*name)}
	if strings.EqualFold(*name, sh.n.DefaultDomain(ctx)) {
		d = def
		d.Domain, d.Default = "", true
	} else if i := slices.IndexFunc(list, func(x nativeDomain) bool { return x.Domain == d.Domain }); i >= 0 {
		d = list[i]
	}
	for field, dst := range map[string]*string{"baseUrlRedirect": &d.RootRedirect,
		"regular404Redirect": &d.NotFoundRedirect, "invalidShortUrlRedirect": &d.InvalidRedirect} {
		if v, given := body[field]; given {
			*dst = ""
			if v != nil {
				*dst = *v
			}
		}
		delete(body, field)
	}
	delete(body, "domain")
	for field := range body {
		invalidShlink(ctx, field) // a field Shlink's domain redirects do not have
		return
	}
	a = sh.n.Call(ctx, "POST", "/admin/domains", d)
	if !a.OK() {
		failShlink(ctx, a, "", "")
		return
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(d.redirects()))
}

// forbidsTagOperations answers 403 forbidden-tag-operation, with detail,
// to a key of one of Shlink's roles, which may not rename or delete tags
// (Shlink's TagService): one limited to domains (DOMAIN_SPECIFIC) or to
// the links it created (AUTHORED_SHORT_URLS). It reports whether it did.
// Its native call rewrites the request: read what it carries first.
func (sh shlink) forbidsTagOperations(ctx *fasthttp.RequestCtx, detail string) bool {
	if key, a := sh.ownKey(ctx); !a.OK() || len(key.Domains) == 0 && !key.OwnLinksOnly {
		return false
	}
	problemShlink(ctx, fasthttp.StatusForbidden, shlinkError+"forbidden-tag-operation", "Forbidden tag operation", detail, nil)
	return true
}

// keyDomains is the domains the request's key is limited to, none when
// it reaches every domain.
func (sh shlink) keyDomains(ctx *fasthttp.RequestCtx) []string {
	key, _ := sh.ownKey(ctx)
	return key.Domains
}

// shlinkOwnKey is what the Shlink API reads of the request's key
// (linkraft's GET /api/v1/key).
type shlinkOwnKey struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Scopes       []string `json:"scopes"`
	Domains      []string `json:"domains"`
	OwnLinksOnly bool     `json:"own_links_only"`
}

// ownKey reads the request's key; an answer that is not a key is a 500.
func (sh shlink) ownKey(ctx *fasthttp.RequestCtx) (shlinkOwnKey, Answer) {
	var key shlinkOwnKey
	a := sh.n.Call(ctx, "GET", "/api/v1/key", nil)
	if a.OK() {
		if err := a.Decode(&key); err != nil {
			return key, Answer{Status: fasthttp.StatusInternalServerError, Body: []byte(err.Error())}
		}
	}
	return key, a
}

// domains lists the default domain and, to an admin key (linkraft's
// domain list is the admin's), every registered domain with its
// redirects. Another key sees the default domain alone, without
// redirects.
func (sh shlink) domains(ctx *fasthttp.RequestCtx) {
	if a := sh.n.Authenticate(ctx, false); !a.OK() {
		failShlink(ctx, a, "", "")
		return
	}
	type domain struct {
		Domain    string          `json:"domain"`
		IsDefault bool            `json:"isDefault"`
		Redirects shlinkRedirects `json:"redirects"`
	}
	list, def, _, admin := sh.nativeDomains(ctx)
	data := []domain{{Domain: sh.n.DefaultDomain(ctx), IsDefault: true, Redirects: def.redirects()}}
	for _, d := range list {
		data = append(data, domain{Domain: d.Domain, Redirects: d.redirects()})
	}
	if own := sh.keyDomains(ctx); !admin && len(own) > 0 {
		// A key limited to domains is shown those alone, as Shlink shows
		// a domain key its domain.
		data = data[:0]
		for _, d := range own {
			data = append(data, domain{Domain: cmp.Or(d, sh.n.DefaultDomain(ctx)), IsDefault: d == ""})
		}
	}
	writeBody(ctx, fasthttp.StatusOK, "application/json", marshal(map[string]any{"domains": map[string]any{
		"data": data, "defaultRedirects": def.redirects(),
	}}))
}
