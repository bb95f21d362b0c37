package httpd

import (
	"strings"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

// TestTagWriteRefusedWithoutEntry: a rename or deletion the state would
// refuse (a tag no link the key may write carries, a new name such links
// already carry) is answered by the node asked, before anything reaches
// the log, so it costs no node an apply; one the state accepts still
// goes through.
func TestTagWriteRefusedWithoutEntry(t *testing.T) {
	s := newTestServer(t, nil)
	waitRaised(t, s)
	_, team := addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite, 0, "team")
	mustCreate(t, s, `{"url":"https://example.com/1","workspace":"team","tags":["news","keep"]}`)
	mustCreate(t, s, `{"url":"https://example.com/2","workspace":"other","tags":["sports"]}`)
	applied := func() uint64 {
		i, _ := s.fsm.Applied()
		return i
	}

	before := applied()
	for _, st := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"a tag no link carries", "PUT", "/api/v1/tags/weather", `{"name":"climate"}`, 404},
		{"deleting it", "DELETE", "/api/v1/tags/weather", "", 404},
		{"a tag only links the key may not write carry", "PUT", "/api/v1/tags/sports", `{"name":"games"}`, 404},
		{"onto a tag the key's links carry", "PUT", "/api/v1/tags/news", `{"name":"KEEP"}`, 409},
	} {
		ctx := do(s, st.method, st.path, "application/json", st.body, "Authorization", "Bearer "+team)
		if ctx.Response.StatusCode() != st.status {
			t.Errorf("%s: %d %s, want %d", st.name, ctx.Response.StatusCode(), ctx.Response.Body(), st.status)
		}
	}
	if after := applied(); after != before {
		t.Errorf("refused tag writes made %d log entries", after-before)
	}

	ctx := do(s, "PUT", "/api/v1/tags/NEWS", "application/json", `{"name":"headlines"}`, "Authorization", "Bearer "+team)
	if ctx.Response.StatusCode() != 200 || !strings.Contains(string(ctx.Response.Body()), `"links":1`) {
		t.Fatalf("rename: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if applied() == before {
		t.Error("an accepted rename made no log entry")
	}
}
