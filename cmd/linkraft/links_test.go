package main

import (
	"encoding/json"
	"net"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

const oneLink = `{"id":3,"short_code":"launch","short_url":"http://sho.rt/launch","original_url":"https://example.com/é","workspace":"team",` +
	`"created_at":"2026-11-21T10:00:00.000Z","expires_at":null,"click_count":7,"last_accessed_at":null}`

// titledLink is oneLink with a title and tags, as the API shows them.
const titledLink = `{"id":4,"short_code":"titled","short_url":"http://sho.rt/titled","original_url":"https://example.com/t","workspace":"team",` +
	`"created_at":"2026-11-21T10:00:00.000Z","expires_at":null,"click_count":0,"last_accessed_at":null,"title":"Launch day","tags":["news","2026"]}`

func TestLinksCreateSendsTheAPIFields(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want map[string]any // the body besides original_url
	}{
		{"code, workspace, expiry, dedupe", []string{"--code", "launch", "--workspace", "team", "--expires-in", "1h", "--dedupe"},
			map[string]any{"custom_code": "launch", "workspace": "team", "expires_in_seconds": 3600.0, "dedupe": true}},
		{"title and tags", []string{"--title", "Launch day", "--tags", "news, 2026,,launch"},
			map[string]any{"title": "Launch day", "tags": []any{"news", "2026", "launch"}}},
		{"an empty title and tags send nothing", []string{"--title", "", "--tags", " , "}, map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := startFakeNode(t, map[string]cannedAnswer{"POST /api/v1/urls": {status: 201, ctype: "application/json", body: oneLink}})
			t.Setenv("LINKRAFT_ADDR", n.addr)
			t.Setenv("LINKRAFT_KEY", "lr_k")
			code, out, errOut := runCmd(t, append([]string{"links", "create", "https://example.com/é"}, tt.args...)...)
			if code != 0 || out != "http://sho.rt/launch\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			req := n.only(t)
			var got map[string]any
			if err := json.Unmarshal(req.body, &got); err != nil {
				t.Fatal(err)
			}
			tt.want["original_url"] = "https://example.com/é"
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("body %v, want %v", got, tt.want)
			}
			if req.auth != "Bearer lr_k" || req.ctype != "application/json" {
				t.Fatalf("auth %q, content type %q", req.auth, req.ctype)
			}
		})
	}
}

func TestLinksUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"links"},
		{"links", "edit", "x"},
		{"links", "create"},
		{"links", "create", "https://a.example", "--expires-in", "1500ms"},
		{"links", "create", "https://a.example", "--expires-in", "1h", "--expires-at", "2030-01-01T00:00:00Z"},
		{"links", "list", "--limit", "0"},
		{"links", "get"},
		{"links", "delete", "a", "b"},
	} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestLinksGetAndDelete(t *testing.T) {
	n := startFakeNode(t, map[string]cannedAnswer{
		"GET /api/v1/urls/launch":    jsonAnswer(oneLink),
		"GET /api/v1/urls/titled":    jsonAnswer(titledLink),
		"DELETE /api/v1/urls/launch": {status: 204},
		"GET /api/v1/urls/gone":      problem(404, "short code gone not found"),
		"DELETE /api/v1/urls/other":  problem(403, "key may not write workspace x"),
	})
	t.Setenv("LINKRAFT_ADDR", n.addr)
	code, out, _ := runCmd(t, "links", "get", "launch")
	if code != 0 || rowFields(t, out, "clicks:")[1] != "7" || rowFields(t, out, "url:")[1] != "https://example.com/é" {
		t.Fatalf("get: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "title:") || strings.Contains(out, "tags:") {
		t.Fatalf("get of a link without a title or tags shows them:\n%s", out)
	}
	code, out, _ = runCmd(t, "links", "get", "titled")
	if code != 0 || !regexp.MustCompile(`(?m)^title: +Launch day$`).MatchString(out) || rowFields(t, out, "tags:")[1] != "news,2026" {
		t.Fatalf("get of a link with a title and tags: exit %d\n%s", code, out)
	}
	if code, out, _ := runCmd(t, "links", "get", "launch", "--json"); code != 0 || strings.TrimSpace(out) != oneLink {
		t.Fatalf("get --json: exit %d\n%s", code, out)
	}
	if code, out, _ := runCmd(t, "links", "delete", "launch"); code != 0 || out != "deleted launch\n" {
		t.Fatalf("delete: exit %d %q", code, out)
	}
	code, _, errOut := runCmd(t, "links", "get", "gone")
	if code != 1 || !strings.Contains(errOut, "404 short code gone not found") {
		t.Fatalf("get of a missing code: exit %d %q", code, errOut)
	}
	code, _, errOut = runCmd(t, "links", "delete", "other")
	if code != 1 || !strings.Contains(errOut, "links:write scope") {
		t.Fatalf("delete without the scope: exit %d %q", code, errOut)
	}
	// A code that is not one cannot reach another endpoint.
	runCmd(t, "links", "get", "../admin/keys")
	if reqs := n.requests(); reqs[len(reqs)-1].path != "/api/v1/urls/..%2Fadmin%2Fkeys" {
		t.Fatalf("path %q", reqs[len(reqs)-1].path)
	}
}

// TestLinksListFollowsCursor serves three pages of one link each.
func TestLinksListFollowsCursor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var cursors []string
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		cursor := string(ctx.QueryArgs().Peek("cursor"))
		cursors = append(cursors, cursor)
		next := map[string]string{"": `"3"`, "3": `"2"`, "2": "null"}[cursor]
		code := map[string]string{"": "c", "3": "b", "2": "a"}[cursor]
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"links":[{"short_code":"` + code + `","workspace":"w","original_url":"https://x.example/` + code + `"}],"next_cursor":` + next + `}`)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	t.Setenv("LINKRAFT_ADDR", ln.Addr().String())

	code, out, errOut := runCmd(t, "links", "list", "--limit", "1")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(errOut, "cursor=3") {
		t.Fatalf("one page: exit %d\n%s%s", code, out, errOut)
	}
	cursors = nil
	code, out, _ = runCmd(t, "links", "list", "--limit", "1", "--all")
	if code != 0 || strings.Count(out, "\n") != 4 || strings.Join(cursors, ",") != ",3,2" {
		t.Fatalf("--all: exit %d, cursors %q\n%s", code, cursors, out)
	}
	code, out, _ = runCmd(t, "links", "list", "--limit", "1", "--all", "--json")
	var doc struct {
		Links      []link  `json:"links"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || len(doc.Links) != 3 || doc.NextCursor != nil {
		t.Fatalf("--all --json: exit %d, %v\n%s", code, err, out)
	}
}
