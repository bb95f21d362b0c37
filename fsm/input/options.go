package input

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/linkraft/linkraft/fsm"
)

// Tag checks a tag: 1 to 40 bytes of letters (any script's, with their
// combining marks), digits, '_', '.' or '-'. Tags name things in people's
// languages (Shlink takes "aäa"); spaces, punctuation and symbols stay out,
// so a tag reads the same in a path, a query and a CSV cell.
func Tag(tag string) error {
	if tag == "" || len(tag) > fsm.MaxTagLen {
		return fmt.Errorf("tags: %q must be 1 to %d bytes long", tag, fsm.MaxTagLen)
	}
	if !utf8.ValidString(tag) {
		return fmt.Errorf("tags: %q is not valid UTF-8", tag)
	}
	for _, r := range tag {
		if r < utf8.RuneSelf && !isTokenByte(byte(r)) && r != '.' ||
			r >= utf8.RuneSelf && !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r) {
			return fmt.Errorf("tags: %q holds %q; use letters, digits, '_', '.' and '-'", tag, r)
		}
	}
	return nil
}

// Tags checks a link's tags and returns them without repeats (compared
// without case, the first spelling kept).
func Tags(tags []string) ([]string, error) {
	var out []string
	for _, t := range tags {
		if err := Tag(t); err != nil {
			return nil, err
		}
		if !containsFold(out, t) {
			out = append(out, t)
		}
	}
	if len(out) > fsm.MaxTags {
		return nil, fmt.Errorf("tags: at most %d per link, got %d", fsm.MaxTags, len(out))
	}
	return out, nil
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// Title checks a link's title: up to fsm.MaxTitleLen (512) characters
// and fsm.MaxTitleBytes (1024) bytes of valid UTF-8 without control
// characters.
func Title(title string) error {
	if !utf8.ValidString(title) {
		return errors.New("title: not valid UTF-8")
	}
	if n := utf8.RuneCountInString(title); n > fsm.MaxTitleLen {
		return fmt.Errorf("title: at most %d characters, got %d", fsm.MaxTitleLen, n)
	}
	if len(title) > fsm.MaxTitleBytes {
		return fmt.Errorf("title: at most %d bytes in UTF-8, got %d", fsm.MaxTitleBytes, len(title))
	}
	for _, r := range title {
		if r < 0x20 || r == 0x7f {
			return errors.New("title: control characters are not allowed")
		}
	}
	return nil
}

// Language checks a rule's language range: a primary tag of 1 to 8
// letters and optional subtags of 1 to 8 letters or digits ("en",
// "pt-BR", "zh-Hant"). It returns it in lower case.
func Language(lang string) (string, error) {
	parts := strings.Split(lang, "-")
	for i, p := range parts {
		ok := len(p) >= 1 && len(p) <= 8
		for j := 0; ok && j < len(p); j++ {
			c := p[j] | 0x20
			ok = c >= 'a' && c <= 'z' || i > 0 && p[j] >= '0' && p[j] <= '9'
		}
		if !ok {
			return "", fmt.Errorf("rules: language %q is not a language tag such as \"en\" or \"pt-BR\"", lang)
		}
	}
	return strings.ToLower(lang), nil
}

// maxRuleQueryBytes bounds a rule's query parameter name or value.
const maxRuleQueryBytes = 256

// RuleQuery checks one query condition of a rule.
func RuleQuery(name, value string) error {
	if name == "" || len(name) > maxRuleQueryBytes || len(value) > maxRuleQueryBytes {
		return fmt.Errorf("rules: query parameter %q: name 1 to %d bytes, value up to %d", name, maxRuleQueryBytes, maxRuleQueryBytes)
	}
	if !utf8.ValidString(name) || !utf8.ValidString(value) {
		return errors.New("rules: query parameters must be valid UTF-8")
	}
	return nil
}

// Options checks the options a node prepared for the log against the
// rules a client's create or edit meets: the leader runs it on what a
// follower relays. A password arrives only as its hash.
func Options(o *fsm.Options, allowPrivate bool) error {
	if o == nil {
		return nil
	}
	if o.MaxVisits > MaxVisits {
		return fmt.Errorf("max_visits: at most %d", MaxVisits)
	}
	if err := Title(o.Title); err != nil {
		return err
	}
	if tags, err := Tags(o.Tags); err != nil {
		return err
	} else if len(tags) != len(o.Tags) {
		return errors.New("tags: repeated")
	}
	if o.PasswordHash != "" && !strings.HasPrefix(o.PasswordHash, "$2") {
		return errors.New("password: not a hash this build makes")
	}
	if len(o.History) > 0 {
		return errors.New("history: made by edits, never sent")
	}
	if len(o.Rules) > fsm.MaxRules {
		return fmt.Errorf("rules: at most %d per link", fsm.MaxRules)
	}
	for _, r := range o.Rules {
		if err := Rule(r, allowPrivate); err != nil {
			return err
		}
	}
	return nil
}

// MaxVisits bounds a link's max_visits: each visit to a limited link is a
// write through the leader's log, so the limit bounds the writes anonymous
// visitors can make one link cause (a link past its limit answers 410 on
// every node without the leader).
const MaxVisits = 1_000_000

// Rule checks one prepared rule.
func Rule(r fsm.Rule, allowPrivate bool) error {
	target, err := Target(r.URL, allowPrivate)
	if err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	if target != r.URL {
		return errors.New("rules: url not in the form a node prepares")
	}
	if r.Language != "" {
		if lang, err := Language(r.Language); err != nil || lang != r.Language {
			return fmt.Errorf("rules: language %q", r.Language)
		}
	}
	if len(r.Query) > fsm.MaxRuleQuery {
		return fmt.Errorf("rules: at most %d query conditions per rule", fsm.MaxRuleQuery)
	}
	for _, q := range r.Query {
		if err := RuleQuery(q.Name, q.Value); err != nil {
			return err
		}
	}
	if r.Country != "" {
		if err := RuleCountry(r.Country); err != nil {
			return fmt.Errorf("rules: %w", err)
		}
	}
	if r.Device > fsm.DeviceDesktop {
		return errors.New("rules: unknown device")
	}
	if r.After != 0 && r.Before != 0 && r.Before <= r.After {
		return errors.New("rules: before must come after after")
	}
	return nil
}

// RuleCountry checks a rule's country condition as a node prepares it:
// an ISO 3166-1 alpha-2 code in upper case.
func RuleCountry(cc string) error {
	if len(cc) != 2 || cc[0] < 'A' || cc[0] > 'Z' || cc[1] < 'A' || cc[1] > 'Z' {
		return fmt.Errorf("country %q: an ISO 3166-1 alpha-2 code in upper case, such as DE", cc)
	}
	return nil
}

// Domain checks a domain's name (a host name: labels of letters, digits
// and '-', joined by dots, at most 128 bytes) and returns it in lower
// case, the one spelling Host headers are compared with.
func Domain(name string) (string, error) {
	name = strings.ToLower(name)
	if name == "" || len(name) > fsm.MaxDomainLen {
		return "", fmt.Errorf("domain: must be 1 to %d characters long", fsm.MaxDomainLen)
	}
	for _, label := range strings.Split(name, ".") {
		ok := label != "" && len(label) <= 63 && label[0] != '-' && label[len(label)-1] != '-'
		for i := 0; ok && i < len(label); i++ {
			c := label[i]
			ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
		}
		if !ok {
			return "", fmt.Errorf("domain: %q is not a host name such as s.example.com", name)
		}
	}
	// Browsers read a host whose last label is a number as an IPv4
	// address: "540.38.386.0" is no host they would ever visit.
	last := name[strings.LastIndexByte(name, '.')+1:]
	if strings.Trim(last, "0123456789") == "" {
		if a, err := netip.ParseAddr(name); err != nil || !a.Is4() {
			return "", fmt.Errorf("domain: %q ends in a number but is not an IPv4 address", name)
		}
	}
	return name, nil
}
