package httpd

import (
	"context"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// tagsResultJSON is what a rename or deletion of a tag answers.
type tagsResultJSON struct {
	Tag   string `json:"tag"`            // the tag's name after the change
	From  string `json:"from,omitempty"` // a rename's old name
	Links int    `json:"links"`          // how many links changed
}

// handleRenameTag renames a tag on every link the key may write (within
// ?workspace= when given): PUT /api/v1/tags/{tag} {"name": new}.
func (s *Server) handleRenameTag(ctx *fasthttp.RequestCtx) {
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
	s.proposeTags(ctx, body.Name)
}

// handleDeleteTag removes a tag from every link the key may write (within
// ?workspace= when given): DELETE /api/v1/tags/{tag}.
func (s *Server) handleDeleteTag(ctx *fasthttp.RequestCtx) { s.proposeTags(ctx, "") }

func (s *Server) proposeTags(ctx *fasthttp.RequestCtx, newName string) {
	tag, _ := ctx.UserValue("tag").(string)
	if err := input.Tag(tag); err != nil {
		writeProblem(ctx, fasthttp.StatusNotFound, "no link carries tag "+tag)
		return
	}
	c := fsm.TagsCommand{Tag: tag, NewName: newName, Workspaces: visibleWorkspacesFor(ctx, fsm.ScopeLinksWrite),
		KeyID: keyID(ctx), Now: time.Now().UnixMilli()}
	res, index, err := cluster.ProposeFor[fsm.TagsResult](context.Background(), s.node.Writes, c, cluster.ProposeOptions{Visible: true})
	if err != nil {
		s.writeError(ctx, err, errorDetail{fsm.ErrTagNotFound, "no link you may change carries tag " + tag},
			errorDetail{fsm.ErrTagConflict, "links you may change already carry tag " + newName + ": rename it first, or delete one of the two"})
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

// maxRobotsAllowed bounds the links robots.txt lists: at about 75 bytes a
// line, well under the 500 KiB search engines read of it. A host with
// more crawlable links has the first in code order allowed; the others
// stay disallowed, as a link that is not crawlable is.
const maxRobotsAllowed = 5000

// handleRobots answers robots.txt as Shlink does: every path disallowed
// but the crawlable links of the domain the Host names.
func (s *Server) handleRobots(ctx *fasthttp.RequestCtx) {
	var domain string
	if d, ok := s.fsm.DomainOfHost(ctx.Request.Header.Host()); ok {
		domain = d.Name
	}
	codes := s.fsm.CrawlableCodes(domain, maxRobotsAllowed, time.Now().UnixMilli())
	var b strings.Builder
	b.WriteString("# For more information about the robots.txt standard, see:\n# https://www.robotstxt.org/orig.html\n\nUser-agent: *\n")
	for _, code := range codes {
		b.WriteString("Allow: /")
		b.WriteString(code)
		b.WriteByte('\n')
	}
	b.WriteString("Disallow: /\n")
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(b.String())
}
