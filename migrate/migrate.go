// Package migrate reads other URL shorteners' exports and turns them into
// linkraft's import format (JSON Lines of short_code, original_url,
// workspace, expires_at, title, tags, created_at and clicks, see POST
// /admin/import in docs/API.md).
//
// Each reader keeps every value its format has, so that the caller can say
// plainly what a migration keeps and what it leaves behind (a value
// linkraft's rules do not allow). Every link keeps the line of the source
// file it came from, so the server's report, which counts lines of the
// import body, can be mapped back to the file a person knows.
//
// The formats, and the versions of the projects they were read from:
//
//   - yourls: the JSON answer of YOURLS's own API, yourls-api.php
//     ?action=stats&filter=last&limit=N&format=json (YOURLS 1.7-1.9:
//     "links" holds link_1, link_2 ... each with shorturl, url, title,
//     timestamp "YYYY-MM-DD hh:mm:ss" and clicks); YOURLS core has no other
//     export.
//   - shlink: the CSV that Shlink's web client exports from its short URL
//     list (short_urls.csv from shlink-web-client 3.x and
//     shlink-web-component: createdAt, title, shortUrl, domain, shortCode,
//     longUrl, tags joined with "|", visits; the first 3.x clients wrote no
//     shortCode and joined tags with ","); columns are found by their header.
//   - kutt: the JSON answer of Kutt's API, GET /api/v2/links (Kutt 2.x and
//     3.x: "data" holds links with address, target, description,
//     created_at, expire_in and visit_count). A link Kutt banned, or one
//     with a password (the API says only that it has one), is a problem,
//     not a link: imported, it would redirect anyone.
//   - bitly: the JSON answer of Bitly's API v4, GET /v4/groups/{guid}/bitlinks
//     ("links" with link, long_url, title, created_at, tags). Bitly's web
//     export is a CSV whose columns Bitly does not document, so it is not
//     read; the API answer is what Bitly documents and other importers use.
//   - csv: a CSV with a header naming linkraft's own fields (short_code,
//     original_url, workspace, expires_at) and optionally title, tags
//     (separated by "|"), created_at and clicks.
package migrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
	"github.com/linkraft/linkraft/fsm/input"
)

// Link is one link read from an export.
type Link struct {
	Line      int    // line of the source file the link starts on
	Code      string // the short code, as the source has it
	URL       string
	Workspace string     // "" when the source has none
	ExpiresAt *time.Time // nil: never

	// Values kept where linkraft's rules allow them, and counted as
	// dropped where they do not.
	Title     string
	Tags      []string
	CreatedAt *time.Time // nil: the source has none
	Clicks    int64
}

// Problem is a line of the source that is not a link linkraft can take.
type Problem struct {
	Line  int
	Error string
}

// Formats are the names Parse accepts.
var Formats = []string{"yourls", "shlink", "kutt", "bitly", "csv"}

// Parse reads an export in the named format. A record it cannot read at
// all (no URL, a date that is no date) is a Problem; a file it cannot read
// at all is an error.
func Parse(format string, data []byte) ([]Link, []Problem, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // spreadsheets write a BOM
	if !utf8.Valid(data) {
		return nil, nil, errors.New("the file is not UTF-8")
	}
	switch format {
	case "yourls":
		return parseYOURLS(data)
	case "shlink":
		return parseShlink(data)
	case "kutt":
		return parseKutt(data)
	case "bitly":
		return parseBitly(data)
	case "csv":
		return parseCSV(data)
	}
	return nil, nil, fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// Plan is what an import would do with a set of links, judged with the
// server's own input rules.
type Plan struct {
	// Send are the links to send, in order; Lines[i] is the source line of
	// Send[i], the i+1-th line of Body.
	Send  []Link
	Body  []byte
	Lines []int
	// kept[i] says what of Send[i] is kept (see Kept and KeptWithout).
	kept []Kept
	// Skipped are repeats of an earlier link of the file (same code, URL
	// and workspace), which the server would skip too.
	Skipped []Problem
	// Refused are links the server would refuse, with the reason.
	Refused []Problem
	Dropped Dropped
}

// Kept counts the creation times and click totals of the links sent that
// the import keeps: the formats that have them do not all have them for
// every link.
type Kept struct {
	CreatedTimes, ClickTotals int
}

// Dropped counts the values of the links sent that linkraft does not keep
// because its rules do not allow them; the links are sent without them.
type Dropped struct {
	Titles, Tags, CreatedTimes, ClickTotals int
}

// NewPlan checks each link against the rules the server applies on import
// (target URL, custom code, workspace, expiry), so that a dry run refuses
// what the server would. allowPrivate is the node's
// --allow-private-targets. workspace, when not "", is the workspace of links
// whose source names none.
func NewPlan(links []Link, workspace string, allowPrivate bool, now time.Time) (*Plan, error) {
	if workspace != "" {
		if err := input.Workspace(workspace); err != nil {
			return nil, fmt.Errorf("--workspace: %w", err)
		}
	}
	p := &Plan{}
	type seen struct {
		line           int
		url, workspace string
	}
	byCode := map[string]seen{}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	for _, l := range links {
		if l.Workspace == "" {
			l.Workspace = workspace
		}
		refuse := func(err error) { p.Refused = append(p.Refused, Problem{Line: l.Line, Error: err.Error()}) }
		target, err := checkLink(l, allowPrivate, now)
		if err != nil {
			refuse(err)
			continue
		}
		ws := l.Workspace
		if ws == "" {
			ws = "default"
		}
		if s, ok := byCode[l.Code]; ok {
			if s.url == target && s.workspace == ws {
				p.Skipped = append(p.Skipped, Problem{Line: l.Line, Error: fmt.Sprintf("same link as line %d", s.line)})
			} else {
				refuse(fmt.Errorf("code %s is already used by line %d for another link", l.Code, s.line))
			}
			continue
		}
		byCode[l.Code] = seen{line: l.Line, url: target, workspace: ws}

		line := struct {
			ShortCode   string   `json:"short_code"`
			OriginalURL string   `json:"original_url"`
			Workspace   string   `json:"workspace,omitempty"`
			ExpiresAt   *string  `json:"expires_at,omitempty"`
			Title       string   `json:"title,omitempty"`
			Tags        []string `json:"tags,omitempty"`
			CreatedAt   *string  `json:"created_at,omitempty"`
			Clicks      int64    `json:"clicks,omitempty"`
		}{ShortCode: l.Code, OriginalURL: target, Workspace: l.Workspace}
		line.Title, line.Tags = keptTitleAndTags(l, &p.Dropped)
		if l.ExpiresAt != nil {
			s := l.ExpiresAt.UTC().Format(time.RFC3339)
			line.ExpiresAt = &s
		}
		var kept Kept
		line.CreatedAt, line.Clicks = keptHistory(l, now, &kept, &p.Dropped)
		if err := enc.Encode(line); err != nil {
			return nil, fmt.Errorf("line %d: encode: %w", l.Line, err)
		}
		p.Send = append(p.Send, l)
		p.Lines = append(p.Lines, l.Line)
		p.kept = append(p.kept, kept)
	}
	p.Body = body.Bytes()
	sort.SliceStable(p.Refused, func(i, j int) bool { return p.Refused[i].Line < p.Refused[j].Line })
	return p, nil
}

// checkLink applies the server's import rules to one link (its workspace
// already defaulted) and returns its target as the server stores it.
func checkLink(l Link, allowPrivate bool, now time.Time) (string, error) {
	target, err := input.Target(l.URL, allowPrivate)
	if err != nil {
		return "", err
	}
	if err := input.CustomCode(l.Code); err != nil {
		return "", err
	}
	if codes.IsReserved(l.Code) {
		return "", fmt.Errorf("custom_code %s is a reserved word", l.Code)
	}
	if l.Workspace != "" {
		if err := input.Workspace(l.Workspace); err != nil {
			return "", err
		}
	}
	if l.ExpiresAt != nil && !l.ExpiresAt.After(now) {
		return "", fmt.Errorf("expired at %s", l.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return target, nil
}

// SourceLine maps a line of the import body (1-based, as the server's
// report counts them) to the line of the source file, or 0.
func (p *Plan) SourceLine(bodyLine int) int {
	if bodyLine < 1 || bodyLine > len(p.Lines) {
		return 0
	}
	return p.Lines[bodyLine-1]
}

// Kept is what the links sent keep, if the server creates them all.
func (p *Plan) Kept() Kept { return p.KeptWithout(nil) }

// KeptWithout is what the links sent keep, less the links of the given
// body lines (1-based, as the server's report counts them): what the links
// the server did not refuse keep.
func (p *Plan) KeptWithout(bodyLines []int) Kept {
	left := make(map[int]bool, len(bodyLines))
	for _, line := range bodyLines {
		left[line] = true
	}
	var k Kept
	for i, kept := range p.kept {
		if !left[i+1] {
			k.CreatedTimes += kept.CreatedTimes
			k.ClickTotals += kept.ClickTotals
		}
	}
	return k
}

// lineAt is the 1-based line of data that offset falls on.
func lineAt(data []byte, offset int64) int {
	return bytes.Count(data[:offset], []byte("\n")) + 1
}

// keptTitleAndTags is the title and the tags of l that linkraft can keep
// (its rules: a title of up to 256 characters, at most 10 tags of
// letters, digits, '_', '.' and '-'); the rest is counted as dropped
// rather than failing the whole link.
func keptTitleAndTags(l Link, dropped *Dropped) (string, []string) {
	title := l.Title
	if title != "" && input.Title(title) != nil {
		title = ""
		dropped.Titles++
	}
	var tags []string
	for _, t := range l.Tags {
		if input.Tag(t) != nil || len(tags) == fsm.MaxTags {
			dropped.Tags++
			continue
		}
		if !slices.ContainsFunc(tags, func(k string) bool { return strings.EqualFold(k, t) }) {
			tags = append(tags, t)
		}
	}
	return title, tags
}

// keptHistory is the creation time (RFC 3339, nil for none) and the click
// total of l that linkraft can keep, counted in kept; what its rules do
// not allow is counted as dropped rather than failing the whole link,
// which is then created at the time of the import, or starts at 0 clicks.
// The server takes a creation time after 1970 and not after its clock
// (now is this machine's: one that runs ahead may still see a very recent
// one refused), and at most fsm.MaxImportedClicks clicks.
func keptHistory(l Link, now time.Time, kept *Kept, dropped *Dropped) (*string, int64) {
	var created *string
	if at := l.CreatedAt; at != nil {
		if at.UnixMilli() > 0 && !at.After(now) {
			s := at.UTC().Format(time.RFC3339Nano)
			created = &s
			kept.CreatedTimes++
		} else {
			dropped.CreatedTimes++
		}
	}
	clicks := l.Clicks
	switch {
	case clicks > 0 && clicks <= fsm.MaxImportedClicks:
		kept.ClickTotals++
	case clicks != 0:
		dropped.ClickTotals++
		clicks = 0
	}
	return created, clicks
}

// splitTags splits a joined tag list, dropping empty entries.
func splitTags(s, sep string) []string {
	var tags []string
	for _, t := range strings.Split(s, sep) {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return slices.Clip(tags)
}
