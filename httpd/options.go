package httpd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// optionFields are what a create and an edit may set beyond the target.
// Fields that may be cleared with null are raw, so null and absent differ.
type optionFields struct {
	Title        *string         `json:"title"`
	Tags         *[]string       `json:"tags"`
	MaxVisits    json.RawMessage `json:"max_visits"`  // a number, or null
	ValidSince   json.RawMessage `json:"valid_since"` // an RFC 3339 time, or null
	Password     json.RawMessage `json:"password"`    // a string, or null
	ForwardQuery *bool           `json:"forward_query"`
	PublicStats  *bool           `json:"public_stats"`
	Rules        json.RawMessage `json:"rules"` // an array, or null (none)
	Crawlable    *bool           `json:"crawlable"`
}

// ruleJSON is a redirect rule as the API takes and shows it.
type ruleJSON struct {
	When whenJSON `json:"when"`
	URL  string   `json:"url"`
}

type whenJSON struct {
	Device   string            `json:"device,omitempty"`
	Language string            `json:"language,omitempty"`
	Query    map[string]string `json:"query,omitempty"`
	Country  string            `json:"country,omitempty"`
	After    string            `json:"after,omitempty"`
	Before   string            `json:"before,omitempty"`
	Browser  string            `json:"browser,omitempty"`
	IP       []string          `json:"ip,omitempty"` // addresses, CIDR blocks, IPv4 wildcards: any one holds
}

// isNull reports whether a raw field was sent as JSON null.
func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// edit turns the fields into the parts of an edit they set. A password is
// checked against the rule and returned, not hashed: hashing costs tens
// of milliseconds of CPU, so it waits until every check that could refuse
// the request has passed (linkPasswords.hash). The node that then hashes
// it — the one the client reached for a create, the leader for an edit, a
// bulk create or an import, which reach it over the cluster's mutual TLS
// — stores and replicates only its hash.
func (li linkInput) edit(f *optionFields) (c fsm.EditCommand, password string, err error) {
	if f.Title != nil {
		if err := input.Title(*f.Title); err != nil {
			return c, "", invalid("%s", err.Error())
		}
		c.Fields |= fsm.EditTitle
		c.Title = *f.Title
	}
	if f.Tags != nil {
		tags, err := input.Tags(*f.Tags)
		if err != nil {
			return c, "", invalid("%s", err.Error())
		}
		c.Fields |= fsm.EditTags
		c.Tags = tags
	}
	if f.MaxVisits != nil {
		c.Fields |= fsm.EditMaxVisits
		if !isNull(f.MaxVisits) {
			n, err := boundedInt("max_visits", f.MaxVisits, input.MaxVisits)
			if err != nil {
				return c, "", err
			}
			c.MaxVisits = uint64(n)
		}
	}
	if f.ValidSince != nil {
		c.Fields |= fsm.EditValidSince
		if !isNull(f.ValidSince) {
			at, err := rawTime("valid_since", f.ValidSince)
			if err != nil {
				return c, "", err
			}
			c.ValidSince = at
		}
	}
	if f.Password != nil {
		c.Fields |= fsm.EditPassword // null, with no hash, removes it
		if !isNull(f.Password) {
			if password, err = passwordOf(f.Password); err != nil {
				return c, "", err
			}
		}
	}
	if f.ForwardQuery != nil {
		c.Fields |= fsm.EditForwardQuery
		c.ForwardQuery = *f.ForwardQuery
	}
	if f.PublicStats != nil {
		c.Fields |= fsm.EditPublicStats
		c.PublicStats = *f.PublicStats
	}
	if f.Crawlable != nil {
		c.Fields |= fsm.EditCrawlable
		c.Crawlable = *f.Crawlable
	}
	if f.Rules != nil {
		var in []ruleJSON
		if err := decodeStrict(f.Rules, &in); err != nil {
			return c, "", invalid("rules: %s", err.Error())
		}
		rules, err := li.rules(in)
		if err != nil {
			return c, "", err
		}
		c.Fields |= fsm.EditRules
		c.Rules = rules
	}
	return c, password, nil
}

// optionsOf is what an edit sets, as a new link's Options; nil for none.
func optionsOf(c fsm.EditCommand) *fsm.Options {
	if c.Fields == 0 {
		return nil
	}
	return &fsm.Options{
		Title: c.Title, Tags: c.Tags, MaxVisits: c.MaxVisits, ValidSince: c.ValidSince, PasswordHash: c.PasswordHash,
		ForwardQuery: c.ForwardQuery, PublicStats: c.PublicStats, Rules: c.Rules, Crawlable: c.Crawlable,
	}
}

func rawTime(field string, raw json.RawMessage) (int64, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, invalid("%s must be an RFC 3339 time such as 2030-01-02T15:04:05Z, or null", field)
	}
	return parseTime(field, v)
}

func parseTime(field, v string) (int64, error) {
	at, err := time.Parse(time.RFC3339, v)
	if err != nil || at.Year() < 1970 || at.Year() > 9999 {
		return 0, invalid("%s must be an RFC 3339 time such as 2030-01-02T15:04:05Z", field)
	}
	return at.UnixMilli(), nil
}

// passwordOf is the password a field sets, checked against the rule.
func passwordOf(raw json.RawMessage) (string, error) {
	var pw string
	if err := json.Unmarshal(raw, &pw); err != nil {
		return "", invalid("password must be a string, or null to remove it")
	}
	if err := checkPasswordRule(pw); err != nil {
		return "", invalid("%s", err.Error())
	}
	return pw, nil
}

// rules checks a link's rules and prepares them for the log.
func (li linkInput) rules(in []ruleJSON) ([]fsm.Rule, error) {
	if len(in) > fsm.MaxRules {
		return nil, invalid("rules: at most %d per link", fsm.MaxRules)
	}
	out := make([]fsm.Rule, 0, len(in))
	for i, r := range in {
		rule, err := li.rule(r)
		if err != nil {
			return nil, invalid("rules[%d]: %s", i, err.Error())
		}
		out = append(out, rule)
	}
	return out, nil
}

func (li linkInput) rule(r ruleJSON) (fsm.Rule, error) {
	var rule fsm.Rule
	target, err := input.Target(r.URL, li.allowPrivateTargets)
	if err != nil {
		return rule, err
	}
	rule.URL = target
	w := r.When
	for _, read := range []func(whenJSON, *fsm.Rule) error{ruleRequest, ruleTimes, ruleClient} {
		if err := read(w, &rule); err != nil {
			return rule, err
		}
	}
	if !w.hasCondition() {
		return rule, errors.New("when sets no condition: a rule without one would always hold; make its url the link's target instead")
	}
	return rule, nil
}

// hasCondition reports whether w sets any condition.
func (w whenJSON) hasCondition() bool {
	return w.Device != "" || w.Language != "" || len(w.Query) > 0 || w.After != "" || w.Before != "" ||
		w.Browser != "" || w.IP != nil || w.Country != ""
}

// ruleRequest reads a rule's conditions on what the request says (device,
// language, query, country) into rule.
func ruleRequest(w whenJSON, rule *fsm.Rule) error {
	device, ok := fsm.ParseDevice(w.Device)
	if !ok {
		return errors.New("device must be ios, android, mobile or desktop")
	}
	rule.Device = device
	if w.Language != "" {
		var err error
		if rule.Language, err = input.Language(w.Language); err != nil {
			return err
		}
	}
	if len(w.Query) > fsm.MaxRuleQuery {
		return errors.New("at most 8 query conditions per rule")
	}
	for name, value := range w.Query {
		if err := input.RuleQuery(name, value); err != nil {
			return err
		}
		rule.Query = append(rule.Query, fsm.QueryParam{Name: name, Value: value})
	}
	slices.SortFunc(rule.Query, func(a, b fsm.QueryParam) int { return strings.Compare(a.Name, b.Name) })
	if w.Country != "" {
		cc := strings.ToUpper(w.Country)
		if err := input.RuleCountry(cc); err != nil {
			return err
		}
		rule.Country = cc
	}
	return nil
}

// ruleTimes reads a rule's after and before into rule.
func ruleTimes(w whenJSON, rule *fsm.Rule) error {
	for _, t := range []struct {
		field string
		raw   string
		dst   *int64
	}{{"after", w.After, &rule.After}, {"before", w.Before, &rule.Before}} {
		if t.raw == "" {
			continue
		}
		var err error
		if *t.dst, err = parseTime(t.field, t.raw); err != nil {
			return err
		}
	}
	if rule.After != 0 && rule.Before != 0 && rule.Before <= rule.After {
		return errors.New("before must be later than after")
	}
	return nil
}

// ruleClient reads a rule's conditions on the visitor's browser and
// address into rule.
func ruleClient(w whenJSON, rule *fsm.Rule) error {
	if w.Browser != "" {
		b, ok := parseBrowser(w.Browser)
		if !ok {
			return errors.New("browser must be chrome, safari, firefox, edge or opera")
		}
		rule.Browser = b
	}
	if w.IP == nil {
		return nil
	}
	if len(w.IP) == 0 || len(w.IP) > fsm.MaxRuleAddresses {
		return fmt.Errorf("ip holds 1 to %d addresses, CIDR blocks or IPv4 wildcards", fsm.MaxRuleAddresses)
	}
	for _, a := range w.IP {
		p, err := fsm.ParseAddressPattern(strings.TrimSpace(a))
		if err != nil {
			return fmt.Errorf("ip %q: %w", a, err)
		}
		rule.Addresses = append(rule.Addresses, p.String())
	}
	return nil
}

// parseBrowser reads a browser's name as fsm.Browser writes it; "other"
// is no browser a rule can ask for.
func parseBrowser(name string) (fsm.Browser, bool) {
	for b := fsm.Chrome; b <= fsm.Opera; b++ {
		if b.String() == name {
			return b, true
		}
	}
	return fsm.BrowserOther, false
}

// optionsView is a link's options as the API shows them: never the
// password or its hash, only whether there is one.
type optionsView struct {
	Domain            string     `json:"domain,omitempty"`
	Title             string     `json:"title,omitempty"`
	Tags              []string   `json:"tags"`
	MaxVisits         *uint64    `json:"max_visits"`
	ValidSince        *string    `json:"valid_since"`
	PasswordProtected bool       `json:"password_protected"`
	ForwardQuery      bool       `json:"forward_query"`
	PublicStats       bool       `json:"public_stats"`
	Rules             []ruleJSON `json:"rules,omitempty"`
	Crawlable         bool       `json:"crawlable"`
}

func viewOptions(l *fsm.Link) optionsView {
	v := optionsView{Domain: l.Domain, Tags: []string{}}
	o := l.Options
	if o == nil {
		return v
	}
	v.Title, v.PasswordProtected, v.ForwardQuery, v.PublicStats = o.Title, o.PasswordHash != "", o.ForwardQuery, o.PublicStats
	v.Crawlable = o.Crawlable
	if len(o.Tags) > 0 {
		v.Tags = o.Tags
	}
	if o.MaxVisits > 0 {
		v.MaxVisits = &o.MaxVisits
	}
	v.ValidSince = optionalTimestamp(o.ValidSince)
	for _, r := range o.Rules {
		w := whenJSON{Device: r.Device.String(), Language: r.Language, Country: r.Country, IP: r.Addresses}
		if r.Browser != fsm.BrowserOther {
			w.Browser = r.Browser.String()
		}
		if r.After != 0 {
			w.After = timestamp(r.After)
		}
		if r.Before != 0 {
			w.Before = timestamp(r.Before)
		}
		for _, q := range r.Query {
			if w.Query == nil {
				w.Query = map[string]string{}
			}
			w.Query[q.Name] = q.Value
		}
		v.Rules = append(v.Rules, ruleJSON{When: w, URL: r.URL})
	}
	return v
}

// formOptions reads the option fields a form may carry: every one but
// rules, tags as a comma-separated list.
func formOptions(get func(string) *string, f *optionFields) error {
	var err error
	if f.ForwardQuery, err = formBool("forward_query", get("forward_query")); err != nil {
		return err
	}
	if f.PublicStats, err = formBool("public_stats", get("public_stats")); err != nil {
		return err
	}
	if f.Crawlable, err = formBool("crawlable", get("crawlable")); err != nil {
		return err
	}
	f.Title = get("title")
	if v := get("tags"); v != nil {
		tags := []string{}
		for _, t := range strings.Split(*v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
		f.Tags = &tags
	}
	if v := get("max_visits"); v != nil && *v != "" {
		f.MaxVisits = json.RawMessage(*v)
	}
	if v := get("valid_since"); v != nil && *v != "" {
		f.ValidSince = json.RawMessage(strconv.Quote(*v))
	}
	if v := get("password"); v != nil && *v != "" {
		f.Password = json.RawMessage(strconv.Quote(*v))
	}
	return nil
}

// formBool reads a form's boolean field: nil when absent.
func formBool(field string, v *string) (*bool, error) {
	if v == nil {
		return nil, nil
	}
	switch *v {
	case "1", "true", "on", "yes":
		return ptr(true), nil
	case "", "0", "false", "off", "no":
		return ptr(false), nil
	}
	return nil, invalid("%s must be true or false", field)
}

func ptr[T any](v T) *T { return &v }
