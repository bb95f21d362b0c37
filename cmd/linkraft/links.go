package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// linksCmd is "linkraft links create|list|get|delete": the links API for
// people in a terminal. It reuses the admin client (its flags, environment,
// error reporting), but any key with the right links scope will do.
func linksCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("linkraft links", linksUsage, map[string]subcommand{
		"create": linksCreate, "list": linksList, "get": linksGet, "edit": linksEdit,
		"history": linksHistory, "delete": linksDelete,
	}, args, stdout, stderr)
}

const linksUsage = `Usage:
  linkraft links create URL [--code C] [--workspace W] [--expires-in D | --expires-at T] [--dedupe]
                           [--title T] [--tags a,b]
                           shorten URL and print the short link
  linkraft links list [--workspace W] [--limit N] [--all]
                           list links, newest first (--all follows every page)
  linkraft links get CODE  show one link with its click count, title and tags
  linkraft links edit CODE [--url U] [--title T] [--tags a,b] [--expires-at T | --no-expiry]
                           [--max-visits N | --no-max-visits] [--password P | --no-password]
                           change what the flags name; the rest stays as it is
  linkraft links history CODE
                           every target the link has had, oldest first
  linkraft links delete CODE
                           delete a link; its code is never handed out again
get, edit, history and delete take --domain D for a link in a registered domain.
Each takes --addr (LINKRAFT_ADDR) and --key (LINKRAFT_KEY): an API key with
links:write (create, edit, delete) or links:read (list, get, history) on the
workspace.
--json prints the node's JSON answer as it is.
`

// link is a link as the API reads it.
type link struct {
	ID             int64    `json:"id"`
	ShortCode      string   `json:"short_code"`
	ShortURL       string   `json:"short_url"`
	OriginalURL    string   `json:"original_url"`
	Workspace      string   `json:"workspace"`
	CreatedAt      string   `json:"created_at"`
	ExpiresAt      *string  `json:"expires_at"`
	ClickCount     int64    `json:"click_count"`
	LastAccessedAt *string  `json:"last_accessed_at"`
	Title          string   `json:"title"`
	Tags           []string `json:"tags"`
	Existing       bool     `json:"existing"`
}

// linksFlags registers the connection flags and --json, and marks the
// client with the scope the call needs, for the hint on 401 and 403.
func linksFlags(name, synopsis string, stderr io.Writer) (*flag.FlagSet, *adminOpts, *bool) {
	o := &adminOpts{}
	fs := newFlagSet(name, synopsis, stderr)
	o.register(fs, 30*time.Second)
	// The admin help text asks for the admin scope; here any key with the
	// links scope will do.
	fs.Lookup("key").Usage = "an API key with the links:read or links:write scope (env LINKRAFT_KEY)"
	raw := fs.Bool("json", false, "print the node's JSON answer as it is")
	return fs, o, raw
}

// linksCall makes one request to the links API. It returns the answer's
// body and -1, or the exit code after reporting the error.
func linksCall(o *adminOpts, fs *flag.FlagSet, stderr io.Writer, need, method, path string, body []byte) ([]byte, int) {
	c, err := o.client(fs.Name(), stderr)
	if err != nil {
		return nil, usageError(fs, stderr, "%v", err)
	}
	c.need = need
	contentType := ""
	if body != nil {
		contentType = "application/json"
	}
	answer, err := c.do(method, path, contentType, body)
	if err != nil {
		return nil, fail(fs.Name(), stderr, err)
	}
	return answer, -1
}

// writeRaw prints a JSON answer as it came, ending in a newline.
func writeRaw(w io.Writer, body []byte) int {
	w.Write(body)
	if !bytes.HasSuffix(body, []byte("\n")) {
		fmt.Fprintln(w)
	}
	return 0
}

func linksCreate(args []string, stdout, stderr io.Writer) int {
	fs, o, raw := linksFlags("links create", "links create URL [--code C] [--workspace W] [--expires-in D | --expires-at T] [--dedupe] [--title T] [--tags a,b] [--addr URL] [--key KEY] [--json]", stderr)
	code := fs.String("code", "", "a custom code (3-64 letters, digits, - or _)")
	workspace := fs.String("workspace", "", "the workspace (default: the key's only workspace, else default)")
	expiresIn := fs.Duration("expires-in", 0, "the link expires after this long, in whole seconds (e.g. 720h)")
	expiresAt := fs.String("expires-at", "", "the link expires at this RFC 3339 time")
	dedupe := fs.Bool("dedupe", false, "return the existing link for the same URL in the workspace instead of making a new one")
	title := fs.String("title", "", "a title for the link (up to 256 characters)")
	tags := fs.String("tags", "", "tags, comma-separated (at most 10, each 1-40 letters, digits, _, . or -)")
	pos, exit := o.parse(fs, args, stderr)
	if exit >= 0 {
		return exit
	}
	switch {
	case len(pos) != 1:
		return usageError(fs, stderr, "give exactly one URL to shorten")
	case *expiresIn != 0 && *expiresAt != "":
		return usageError(fs, stderr, "give --expires-in or --expires-at, not both")
	case *expiresIn < 0 || *expiresIn%time.Second != 0:
		return usageError(fs, stderr, "--expires-in must be a positive whole number of seconds")
	}
	req := map[string]any{"original_url": pos[0]}
	if *code != "" {
		req["custom_code"] = *code
	}
	if *workspace != "" {
		req["workspace"] = *workspace
	}
	if *expiresIn > 0 {
		req["expires_in_seconds"] = int64(*expiresIn / time.Second)
	} else if *expiresAt != "" {
		req["expires_at"] = *expiresAt
	}
	if *dedupe {
		req["dedupe"] = true
	}
	// Empty is no title and no tags, as the API has it: nothing to send.
	if *title != "" {
		req["title"] = *title
	}
	if list := tagList(*tags); len(list) > 0 {
		req["tags"] = list
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fail(fs.Name(), stderr, fmt.Errorf("encode the request: %w", err))
	}
	answer, exit := linksCall(o, fs, stderr, "links:write", http.MethodPost, "/api/v1/urls", body)
	if exit >= 0 {
		return exit
	}
	if *raw {
		return writeRaw(stdout, answer)
	}
	var l link
	if err := json.Unmarshal(answer, &l); err != nil {
		return fail(fs.Name(), stderr, fmt.Errorf("the node's answer is not a link: %w", err))
	}
	if l.Existing {
		fmt.Fprintf(stderr, "an existing link for this URL in %s:\n", l.Workspace)
	}
	fmt.Fprintln(stdout, l.ShortURL)
	return 0
}

// listPage is one page of GET /api/v1/urls. Links stay raw so that --json
// --all prints them exactly as the node sent them.
type listPage struct {
	Links      []json.RawMessage `json:"links"`
	NextCursor *string           `json:"next_cursor"`
}

func linksList(args []string, stdout, stderr io.Writer) int {
	fs, o, raw := linksFlags("links list", "links list [--workspace W] [--limit N] [--all] [--addr URL] [--key KEY] [--json]", stderr)
	workspace := fs.String("workspace", "", "list this workspace (default: every workspace the key may see)")
	limit := fs.Int("limit", 100, "links per page, 1-1000")
	all := fs.Bool("all", false, "follow next_cursor until the last page")
	pos, exit := o.parse(fs, args, stderr)
	if exit >= 0 {
		return exit
	}
	switch {
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected arguments: %s", strings.Join(pos, " "))
	case *limit < 1 || *limit > 1000:
		return usageError(fs, stderr, "--limit must be 1-1000")
	}
	get := func(cursor string) ([]byte, int) {
		q := url.Values{"limit": {strconv.Itoa(*limit)}}
		if *workspace != "" {
			q.Set("workspace", *workspace)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		return linksCall(o, fs, stderr, "links:read", http.MethodGet, "/api/v1/urls?"+q.Encode(), nil)
	}
	if *raw && !*all {
		answer, exit := get("")
		if exit >= 0 {
			return exit
		}
		return writeRaw(stdout, answer)
	}
	links, next, exit := listPages(fs.Name(), stderr, get, *all)
	switch {
	case exit >= 0:
		return exit
	case *raw:
		// Every page in one document, shaped like a single last page.
		doc, err := json.Marshal(listPage{Links: append([]json.RawMessage{}, links...)})
		if err != nil {
			return fail(fs.Name(), stderr, fmt.Errorf("encode the links: %w", err))
		}
		return writeRaw(stdout, doc)
	}
	if err := printLinks(stdout, links); err != nil {
		return fail(fs.Name(), stderr, err)
	}
	if next != "" {
		fmt.Fprintf(stderr, "more links: --all, or the API with cursor=%s\n", next)
	}
	return 0
}

// listPages gets the first page of links with get and, with all, every
// page after it. It returns the links, the cursor of the page after them
// ("" after the last) and -1, or the exit code after reporting the error.
func listPages(command string, stderr io.Writer, get func(cursor string) ([]byte, int), all bool) ([]json.RawMessage, string, int) {
	var links []json.RawMessage
	cursor := ""
	for {
		answer, exit := get(cursor)
		if exit >= 0 {
			return nil, "", exit
		}
		var page listPage
		if err := json.Unmarshal(answer, &page); err != nil {
			return nil, "", fail(command, stderr, fmt.Errorf("the node's answer is not a list of links: %w", err))
		}
		links = append(links, page.Links...)
		next := ""
		if page.NextCursor != nil {
			next = *page.NextCursor
		}
		switch {
		case !all || next == "":
			return links, next, -1
		case next == cursor:
			return nil, "", fail(command, stderr, fmt.Errorf("the node sent cursor %s twice", cursor))
		}
		cursor = next
	}
}

// printLinks prints links as a table, one line each.
func printLinks(w io.Writer, links []json.RawMessage) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CODE\tWORKSPACE\tCLICKS\tCREATED\tEXPIRES\tURL")
	for _, r := range links {
		var l link
		if err := json.Unmarshal(r, &l); err != nil {
			return fmt.Errorf("the node's answer holds something that is not a link: %w", err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", l.ShortCode, l.Workspace, l.ClickCount, l.CreatedAt, never(l.ExpiresAt), l.OriginalURL)
	}
	return tw.Flush()
}

func never(s *string) string {
	if s == nil {
		return "never"
	}
	return *s
}

// codePath is the API path of one link; the code is escaped so that a
// mistyped argument cannot name another endpoint. sub is a sub-resource
// ("/history") or ""; a domain, if any, goes in the query.
func codePath(code, sub, domain string) string {
	p := "/api/v1/urls/" + url.PathEscape(code) + sub
	if domain != "" {
		p += "?domain=" + url.QueryEscape(domain)
	}
	return p
}

func linksEdit(args []string, stdout, stderr io.Writer) int {
	fs, o, raw := linksFlags("links edit", "links edit CODE [flags] [--addr URL] [--key KEY] [--json]", stderr)
	domain := fs.String("domain", "", "the link's registered domain")
	fs.String("url", "", "the new target")
	fs.String("title", "", "the new title (\"\" removes it)")
	tags := fs.String("tags", "", "the tags, comma-separated, replacing the link's (\"\" removes them)")
	fs.String("expires-at", "", "expire at this RFC 3339 time")
	fs.Bool("no-expiry", false, "never expire")
	maxVisits := fs.Int64("max-visits", 0, "answer 410 after this many visits")
	fs.Bool("no-max-visits", false, "remove the visit limit")
	fs.String("password", "", "protect the link with this password (8-128 characters)")
	fs.Bool("no-password", false, "remove the password")
	pos, exit := o.parse(fs, args, stderr)
	if exit >= 0 {
		return exit
	}
	if len(pos) != 1 || pos[0] == "" {
		return usageError(fs, stderr, "give the code of one link")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	edit := map[string]any{}
	for name, field := range map[string]string{"url": "original_url", "title": "title", "expires-at": "expires_at", "password": "password"} {
		if set[name] {
			edit[field] = fs.Lookup(name).Value.String()
		}
	}
	if set["tags"] {
		edit["tags"] = tagList(*tags)
	}
	if set["max-visits"] {
		edit["max_visits"] = *maxVisits
	}
	for flagName, field := range map[string]string{"no-expiry": "expires_at", "no-max-visits": "max_visits", "no-password": "password"} {
		if set[flagName] {
			if _, both := edit[field]; both {
				return usageError(fs, stderr, "--%s contradicts the flag that sets %s", flagName, field)
			}
			edit[field] = nil
		}
	}
	if len(edit) == 0 {
		return usageError(fs, stderr, "name at least one thing to change")
	}
	body, err := json.Marshal(edit)
	if err != nil {
		return fail(fs.Name(), stderr, fmt.Errorf("encode the request: %w", err))
	}
	answer, exit := linksCall(o, fs, stderr, "links:write", http.MethodPatch, codePath(pos[0], "", *domain), body)
	if exit >= 0 {
		return exit
	}
	if *raw {
		return writeRaw(stdout, answer)
	}
	var l link
	if err := json.Unmarshal(answer, &l); err != nil {
		return fail(fs.Name(), stderr, fmt.Errorf("the node's answer is not a link: %w", err))
	}
	fmt.Fprintf(stdout, "%s -> %s\n", l.ShortURL, l.OriginalURL)
	return 0
}

// tagList splits --tags: comma-separated, blanks around a tag and empty
// ones dropped. It is never nil, so that an edit's --tags "" sends [],
// which removes the link's tags.
func tagList(s string) []string {
	list := []string{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			list = append(list, t)
		}
	}
	return list
}

func linksHistory(args []string, stdout, stderr io.Writer) int {
	fs, o, raw := linksFlags("links history", "links history CODE [--domain D] [--addr URL] [--key KEY] [--json]", stderr)
	domain := fs.String("domain", "", "the link's registered domain")
	pos, exit := o.parse(fs, args, stderr)
	if exit >= 0 {
		return exit
	}
	if len(pos) != 1 || pos[0] == "" {
		return usageError(fs, stderr, "give the code of one link")
	}
	answer, exit := linksCall(o, fs, stderr, "links:read", http.MethodGet, codePath(pos[0], "/history", *domain), nil)
	if exit >= 0 {
		return exit
	}
	if *raw {
		return writeRaw(stdout, answer)
	}
	var h struct {
		Versions []struct {
			OriginalURL string `json:"original_url"`
			ChangedAt   string `json:"changed_at"`
			KeyID       string `json:"key_id"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(answer, &h); err != nil {
		return fail(fs.Name(), stderr, fmt.Errorf("the node's answer is not a history: %w", err))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SINCE\tKEY\tTARGET")
	for _, v := range h.Versions {
		key := v.KeyID
		if key == "" {
			key = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.ChangedAt, key, v.OriginalURL)
	}
	tw.Flush()
	return 0
}

func linksGet(args []string, stdout, stderr io.Writer) int {
	fs, o, raw := linksFlags("links get", "links get CODE [--domain D] [--addr URL] [--key KEY] [--json]", stderr)
	domain := fs.String("domain", "", "the link's registered domain")
	pos, exit := o.parse(fs, args, stderr)
	if exit >= 0 {
		return exit
	}
	if len(pos) != 1 || pos[0] == "" {
		return usageError(fs, stderr, "give the code of one link")
	}
	answer, exit := linksCall(o, fs, stderr, "links:read", http.MethodGet, codePath(pos[0], "", *domain), nil)
	if exit >= 0 {
		return exit
	}
	if *raw {
		return writeRaw(stdout, answer)
	}
	var l link
	if err := json.Unmarshal(answer, &l); err != nil {
		return fail(fs.Name(), stderr, fmt.Errorf("the node's answer is not a link: %w", err))
	}
	last := "never"
	if l.LastAccessedAt != nil {
		last = *l.LastAccessedAt
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "code:\t%s\n", l.ShortCode)
	fmt.Fprintf(tw, "short url:\t%s\n", l.ShortURL)
	fmt.Fprintf(tw, "url:\t%s\n", l.OriginalURL)
	fmt.Fprintf(tw, "workspace:\t%s\n", l.Workspace)
	if l.Title != "" {
		fmt.Fprintf(tw, "title:\t%s\n", l.Title)
	}
	if len(l.Tags) > 0 {
		fmt.Fprintf(tw, "tags:\t%s\n", strings.Join(l.Tags, ","))
	}
	fmt.Fprintf(tw, "clicks:\t%d\n", l.ClickCount)
	fmt.Fprintf(tw, "last click:\t%s\n", last)
	fmt.Fprintf(tw, "created:\t%s\n", l.CreatedAt)
	fmt.Fprintf(tw, "expires:\t%s\n", never(l.ExpiresAt))
	tw.Flush()
	return 0
}

func linksDelete(args []string, stdout, stderr io.Writer) int {
	fs, o, _ := linksFlags("links delete", "links delete CODE [--domain D] [--addr URL] [--key KEY]", stderr)
	domain := fs.String("domain", "", "the link's registered domain")
	pos, exit := o.parse(fs, args, stderr)
	if exit >= 0 {
		return exit
	}
	if len(pos) != 1 || pos[0] == "" {
		return usageError(fs, stderr, "give the code of one link")
	}
	if _, exit := linksCall(o, fs, stderr, "links:write", http.MethodDelete, codePath(pos[0], "", *domain), nil); exit >= 0 {
		return exit
	}
	fmt.Fprintf(stdout, "deleted %s\n", pos[0])
	return 0
}
