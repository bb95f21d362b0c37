package httpd

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// tagsAPI serves the tags (list, rename, delete) and each domain's
// robots.txt, which lists its links' codes by tag.
type tagsAPI struct {
	fsm    *fsm.FSM
	reads  Reads
	writes Writes
	lookup linkLookup
	// robots keeps each domain's robots.txt between writes.
	robots *robotsCache
	log    *slog.Logger
}

func (api *tagsAPI) register(rt routing) {
	rt.handle("GET", "/api/v1/tags", "tags", rt.require(fsm.ScopeLinksRead, api.handleTags))
	// Renaming and deleting a tag change many links in one entry, which
	// only the leader of a raised cluster applies.
	write := func(h fasthttp.RequestHandler) fasthttp.RequestHandler {
		return rt.require(fsm.ScopeLinksWrite, rt.limitCreates(rt.forwarder(h, forwardWrite.needs(fsm.LevelVisitRows))))
	}
	rt.handle("PUT", "/api/v1/tags/{tag}", "tags", write(api.handleRenameTag))
	rt.handle("DELETE", "/api/v1/tags/{tag}", "tags", write(api.handleDeleteTag))
	rt.handle("GET", "/robots.txt", "robots", api.handleRobots)
}

// tagsResultJSON is what a rename or deletion of a tag answers.
type tagsResultJSON struct {
	Tag   string `json:"tag"`            // the tag's name after the change
	From  string `json:"from,omitempty"` // a rename's old name
	Links int    `json:"links"`          // how many links changed
}

// handleRenameTag renames a tag on every link the key may write (within
// ?workspace= when given): PUT /api/v1/tags/{tag} {"name": new}.
func (api *tagsAPI) handleRenameTag(ctx *fasthttp.RequestCtx) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decodeStrict(ctx.PostBody(), &body); err != nil {
		writeBadRequest(ctx, err)
		return
	}
	if err := input.Tag(body.Name); err != nil {
		writeBadRequest(ctx, invalid("name: %s", strings.TrimPrefix(err.Error(), "tags: ")))
		return
	}
	api.proposeTags(ctx, body.Name)
}

// handleDeleteTag removes a tag from every link the key may write (within
// ?workspace= when given): DELETE /api/v1/tags/{tag}.
func (api *tagsAPI) handleDeleteTag(ctx *fasthttp.RequestCtx) { api.proposeTags(ctx, "") }

func (api *tagsAPI) proposeTags(ctx *fasthttp.RequestCtx, newName string) {
	tag := pathParam(ctx, "tag")
	if err := input.Tag(tag); err != nil {
		writeProblem(ctx, fasthttp.StatusNotFound, "no link carries tag "+tag)
		return
	}
	c := fsm.TagsCommand{Tag: tag, NewName: newName, Workspaces: visibleWorkspacesFor(ctx, fsm.ScopeLinksWrite),
		KeyID: keyID(ctx), Now: time.Now().UnixMilli()}
	refused := func(err error) {
		writeError(ctx, api.log, err, errorDetail{fsm.ErrTagNotFound, "no link you may change carries tag " + tag},
			errorDetail{fsm.ErrTagConflict, "links you may change already carry tag " + newName + ": rename it first, or delete one of the two"})
	}
	if err := api.tagsRefusal(ctx, c); err != nil {
		refused(err)
		return
	}
	res, index, err := cluster.ProposeFor[fsm.TagsResult](context.Background(), api.writes, c, cluster.ProposeOptions{Visible: true})
	if err != nil {
		refused(err)
		return
	}
	markApplied(ctx, index)
	out := tagsResultJSON{Tag: newName, Links: res.Links}
	if newName == "" {
		out.Tag = tag
	} else {
		out.From = tag
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// tagsRefusal is the refusal the state would give c, found on this node
// before it is proposed: fsm.ErrTagNotFound or fsm.ErrTagConflict, nil
// when the entry may be proposed. Applying a TagsCommand scans every link
// with options under the write lock, on every node, even to refuse it;
// read here, a rename or deletion the state would refuse (of a tag no
// link carries, say, which any key may ask for) costs one node's read
// instead. The state's check stays the authority: this one is never
// stricter (it lists the tags of every link the key may write, in any
// letter case), so what it lets through the entry decides.
func (api *tagsAPI) tagsRefusal(ctx *fasthttp.RequestCtx, c fsm.TagsCommand) error {
	// Read-after-write, as a list: a tag just added anywhere is seen.
	// Without a leader the proposal fails anyway; it says so, not this.
	if err := api.reads.CatchUp(context.Background()); err != nil {
		return nil
	}
	domains := keyDomains(ctx)
	if len(domains) == 0 { // a key limited to no domain is not limited (fsm.APIKey.SeesDomain)
		domains = nil
	}
	rename := c.NewName != "" && !strings.EqualFold(c.NewName, c.Tag)
	var found, taken bool
	for _, t := range api.fsm.TagsOf(c.Workspaces, domains, keyAuthor(ctx)) {
		found = found || listedAs(t.Tag, c.Tag)
		taken = taken || rename && listedAs(t.Tag, c.NewName)
	}
	switch {
	case !found:
		return fsm.ErrTagNotFound
	case taken:
		return fsm.ErrTagConflict
	}
	return nil
}

// listedAs reports whether a tag listed by fsm.Tags (in lower case) may be
// the tag name, compared as the state compares tags (strings.EqualFold).
// Lower-casing takes a few letters out of their case-folding class (U+0130
// becomes an ASCII i), so the lower-cased name is tried too: a listed tag
// is never missed, at worst one is taken for another.
func listedAs(listed, name string) bool {
	return strings.EqualFold(listed, name) || listed == strings.ToLower(name)
}

// maxRobotsAllowed bounds the links robots.txt lists: at about 75 bytes a
// line, well under the 500 KiB search engines read of it. A host with
// more crawlable links has the first in code order allowed; the others
// stay disallowed, as a link that is not crawlable is.
const maxRobotsAllowed = 5000

// handleRobots answers robots.txt as Shlink does: every path disallowed
// but the crawlable links of the domain the Host names. It lists what was
// acknowledged anywhere before the request, as a list does: it catches up
// first, in the one read-index round concurrent callers share, so a flood
// of it costs the leader one round at a time, not one a request.
func (api *tagsAPI) handleRobots(ctx *fasthttp.RequestCtx) {
	api.lookup.catchUp(ctx)
	var domain string
	if d, ok := api.fsm.DomainOfHost(ctx.Request.Header.Host()); ok {
		domain = d.Name
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.Response.SetBodyRaw(api.robots.body(api.fsm, domain, time.Now().UnixMilli()))
}

// robotsCache keeps each domain's robots.txt with the state version and
// the time it holds until. robots.txt is anonymous and not rate limited,
// and making it reads up to maxRobotsAllowed links: kept, a flood of it
// costs a map lookup between writes, and a read only after one. Reads are
// made one at a time, so the requests that arrive together after a write
// wait for one read rather than each making its own.
type robotsCache struct {
	mu      sync.RWMutex
	entries map[string]robotsEntry // by domain, "" for the default one
	bytes   int                    // the bodies' length, together
	fill    sync.Mutex             // held while scanning
	scans   atomic.Uint64          // how many scans were made (tests)
}

type robotsEntry struct {
	version fsm.StateVersion
	until   int64  // fsm.Crawlable.Until: 0, or when a listed link expires
	body    []byte // never changed once kept: served without a copy
}

const (
	// maxRobotsCached is every domain a state may have, and the default
	// one: with one server in the process, none is ever dropped.
	maxRobotsCached = fsm.MaxDomains + 1
	// maxRobotsBytes bounds the bodies kept: a body is up to about 75
	// bytes for each of maxRobotsAllowed links, and a thousand domains
	// with as many crawlable links each would keep hundreds of MB.
	maxRobotsBytes = 64 << 20
)

func newRobotsCache() *robotsCache {
	return &robotsCache{entries: map[string]robotsEntry{}}
}

// body is domain's robots.txt in f's state at now.
func (c *robotsCache) body(f *fsm.FSM, domain string, now int64) []byte {
	if body, ok := c.get(domain, f.StateVersion(), now); ok {
		return body
	}
	c.fill.Lock()
	defer c.fill.Unlock()
	if body, ok := c.get(domain, f.StateVersion(), now); ok { // scanned while this waited
		return body
	}
	c.scans.Add(1)
	a := f.Crawlable(domain, maxRobotsAllowed, now)
	body := renderRobots(a.Codes)
	c.put(domain, robotsEntry{version: a.Version, until: a.Until, body: body})
	return body
}

// get is the body kept for domain if it was read from version v and
// holds at now.
func (c *robotsCache) get(domain string, v fsm.StateVersion, now int64) ([]byte, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[domain]
	if !ok || e.version != v || e.until != 0 && now >= e.until {
		return nil, false
	}
	return e.body, true
}

// put keeps e for domain, first dropping others (whichever the map
// yields: they are scanned again when asked) while a bound would be
// passed.
func (c *robotsCache) put(domain string, e robotsEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[domain]; ok {
		c.bytes -= len(old.body)
		delete(c.entries, domain)
	}
	for other, old := range c.entries {
		if len(c.entries) < maxRobotsCached && c.bytes+len(e.body) <= maxRobotsBytes {
			break
		}
		c.bytes -= len(old.body)
		delete(c.entries, other)
	}
	c.entries[domain] = e
	c.bytes += len(e.body)
}

// renderRobots is robots.txt allowing codes alone.
func renderRobots(codes []string) []byte {
	const head = "# For more information about the robots.txt standard, see:\n# https://www.robotstxt.org/orig.html\n\nUser-agent: *\n"
	b := make([]byte, 0, len(head)+len("Disallow: /\n")+len(codes)*(len("Allow: /\n")+16))
	b = append(b, head...)
	for _, code := range codes {
		b = append(b, "Allow: /"...)
		b = append(b, code...)
		b = append(b, '\n')
	}
	return append(b, "Disallow: /\n"...)
}

// handleTags lists the tags of the links the key sees (or of one
// workspace), each with how many links carry it and their clicks.
func (api *tagsAPI) handleTags(ctx *fasthttp.RequestCtx) {
	api.lookup.catchUp(ctx)
	workspaces := visibleWorkspaces(ctx)
	tags := api.fsm.TagsOf(workspaces, keyDomains(ctx), keyAuthor(ctx))
	type tagJSON struct {
		Tag    string `json:"tag"`
		Links  int    `json:"links"`
		Clicks uint64 `json:"clicks"`
	}
	out := make([]tagJSON, len(tags))
	for i, t := range tags {
		out[i] = tagJSON{Tag: t.Tag, Links: t.Links, Clicks: t.Clicks}
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"tags": out})
}
