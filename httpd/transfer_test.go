package httpd

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster/wire"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// importReportOf posts body to /admin/import and decodes the report.
func importReportOf(t *testing.T, s *Server, body string, headers ...string) (importReport, string) {
	t.Helper()
	ctx := do(s, "POST", "/admin/import", "application/x-ndjson", body, headers...)
	if ctx.Response.StatusCode() != 200 {
		t.Fatalf("POST /admin/import: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	var r importReport
	if err := json.Unmarshal(ctx.Response.Body(), &r); err != nil {
		t.Fatalf("import report %s: %v", ctx.Response.Body(), err)
	}
	return r, string(ctx.Response.Header.Peek(wire.AppliedIndexHeader))
}

func requireRedirect(t *testing.T, s *Server, code, want string) {
	t.Helper()
	ctx := do(s, "GET", "/"+code, "", "")
	if got := string(ctx.Response.Header.Peek("Location")); ctx.Response.StatusCode() != 302 || got != want {
		t.Errorf("GET /%s: %d to %q, want 302 to %q", code, ctx.Response.StatusCode(), got, want)
	}
}

func TestImportReport(t *testing.T) {
	s := newTestServer(t, nil)
	mustCreate(t, s, `{"url":"https://example.com/present","custom_code":"present"}`)
	mustCreate(t, s, `{"url":"https://example.com/gone","custom_code":"gone"}`)
	if ctx := do(s, "DELETE", "/api/v1/urls/gone", "", ""); ctx.Response.StatusCode() != 204 {
		t.Fatalf("delete: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}

	lines := []string{
		1:  `{"short_code":"imp-one","original_url":"https://example.com/one","workspace":"default","expires_at":null}`,
		2:  ``,
		3:  `{"short_code":"imp-two","original_url":"https://example.com/two","workspace":"team-a","expires_at":"2099-01-02T03:04:05Z"}` + "\r",
		4:  `{not json`,
		5:  `{"short_code":"imp-private","original_url":"http://127.0.0.1/admin"}`,
		6:  `{"short_code":"admin","original_url":"https://example.com/reserved"}`,
		7:  `{"short_code":"imp-one","original_url":"https://example.com/one"}`,
		8:  `{"short_code":"imp-one","original_url":"https://example.com/other"}`,
		9:  `{"short_code":"present","original_url":"https://example.com/present","workspace":"default"}`,
		10: `{"short_code":"present","original_url":"https://example.com/present","workspace":"other"}`,
		11: `{"short_code":"gone","original_url":"https://example.com/gone"}`,
		12: `{"id":3,"short_code":"imp-three","short_url":"http://sho.rt/imp-three","original_url":"https://example.com/caf%C3%A9","workspace":"default","created_at":"2026-01-01T00:00:00.000Z","expires_at":null,"click_count":5,"last_accessed_at":null}`,
		13: `{"short_code":"imp-esc","original_url":"https:\/\/example.com\/esc?a=1\u0026b=2"}`,
		14: `{"short_code":"x","original_url":"https://example.com/short-code"}`,
		15: `{"short_code":"imp-exp","original_url":"https://example.com/exp","expires_at":"tomorrow"}`,
		16: `  `,
	}
	report, _ := importReportOf(t, s, strings.Join(lines[1:], "\n"))

	notJSON := json.Unmarshal([]byte(lines[4]), &importLine{})
	_, private := input.Target("http://127.0.0.1/admin", false)
	want := importReport{Created: 4, Skipped: 2, Failed: []importFailure{
		{Line: 4, Error: "not a JSON object: " + notJSON.Error()},
		{Line: 5, Error: private.Error()},
		{Line: 6, Error: "code is a reserved word"},
		{Line: 8, Error: "code imp-one is taken by another link or was deleted"},
		{Line: 10, Error: "code present is taken by another link or was deleted"},
		{Line: 11, Error: "code gone is taken by another link or was deleted"},
		{Line: 14, Error: "custom_code: must be 3 to 64 characters long, got 1"},
		{Line: 15, Error: "expires_at is not an RFC 3339 time"},
	}}
	if !reflect.DeepEqual(report, want) {
		t.Errorf("report:\n got %+v\nwant %+v", report, want)
	}

	requireRedirect(t, s, "imp-one", "https://example.com/one")
	requireRedirect(t, s, "imp-three", "https://example.com/caf%C3%A9")
	requireRedirect(t, s, "imp-esc", "https://example.com/esc?a=1&b=2")
	requireRedirect(t, s, "present", "https://example.com/present")
	ctx := do(s, "GET", "/api/v1/urls/imp-two", "", "")
	var two struct{ Workspace, ExpiresAt string }
	if err := json.Unmarshal(ctx.Response.Body(), &struct {
		Workspace *string `json:"workspace"`
		ExpiresAt *string `json:"expires_at"`
	}{&two.Workspace, &two.ExpiresAt}); err != nil || two.Workspace != "team-a" || two.ExpiresAt != "2099-01-02T03:04:05.000Z" {
		t.Errorf("imp-two: %s (%v), want workspace team-a, expiring 2099-01-02T03:04:05.000Z", ctx.Response.Body(), err)
	}
	for _, code := range []string{"imp-private", "imp-exp", "x", "admin"} {
		if _, ok := s.fsm.Get(code); ok {
			t.Errorf("refused line created %s", code)
		}
	}
}

// An import none of whose lines passes the checks before proposing
// reports each of them, and the node goes on (the report is tallied on a
// goroutine of its own, where a panic would end the process).
func TestImportOfOnlyRefusedLines(t *testing.T) {
	s := newTestServer(t, nil)
	report, _ := importReportOf(t, s, `{"short_code":"x","original_url":"https://example.com/"}`+"\n{not json\n")
	if report.Created != 0 || len(report.Failed) != 2 || report.Failed[0].Line != 1 || report.Failed[1].Line != 2 {
		t.Fatalf("report %+v, want lines 1 and 2 failed", report)
	}
	if report, _ := importReportOf(t, s, `{"short_code":"after","original_url":"https://example.com/after"}`); report.Created != 1 {
		t.Fatalf("the next import: %+v", report)
	}
}

// Lines are proposed in the body's order, however the body is cut up: of
// two lines with one code the earlier wins, also chunks apart.
func TestImportEarlierLineWins(t *testing.T) {
	s := newTestServer(t, nil)
	const lines = 2*importChunkLines + 500
	var body strings.Builder
	for i := 1; i <= lines; i++ {
		code, url := fmt.Sprintf("code-%05d", i), fmt.Sprintf("https://example.com/%d", i)
		switch i {
		case lines - 1: // line 1's code, another URL
			code, url = "code-00001", "https://example.com/later"
		case lines: // line 1 again
			code, url = "code-00001", "https://example.com/1"
		}
		fmt.Fprintf(&body, `{"short_code":%q,"original_url":%q}`+"\n", code, url)
	}
	report, _ := importReportOf(t, s, body.String())
	want := importReport{Created: lines - 2, Skipped: 1, Failed: []importFailure{
		{Line: lines - 1, Error: "code code-00001 is taken by another link or was deleted"},
	}}
	if !reflect.DeepEqual(report, want) {
		t.Errorf("report:\n got %+v\nwant %+v", report, want)
	}
	requireRedirect(t, s, "code-00001", "https://example.com/1")
	requireRedirect(t, s, fmt.Sprintf("code-%05d", lines-2), fmt.Sprintf("https://example.com/%d", lines-2))
	if got := s.fsm.Len(); got != lines-2 {
		t.Errorf("the node holds %d links, want %d", got, lines-2)
	}
}

// Once the cluster takes no writes, the lines not yet proposed are not
// attempted, and the report still names every line.
func TestImportStopsWhenWritesFail(t *testing.T) {
	s := newTestServer(t, nil)
	if err := realNode(s).Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Chunks beyond the first importInflight+2 are proposed only after the
	// first one failed.
	const lines = (importInflight + 4) * importChunkLines
	var body strings.Builder
	for i := 1; i < lines; i++ {
		fmt.Fprintf(&body, `{"short_code":"code-%05d","original_url":"https://example.com/%d"}`+"\n", i, i)
	}
	body.WriteString("{not json")

	report, index, read := s.api.transfer.importBody(strings.NewReader(body.String()), fsm.RootKeyID)
	if read.err != nil || read.lines != lines {
		t.Fatalf("read %d lines, error %v; want %d, none", read.lines, read.err, lines)
	}
	if report.Created != 0 || report.Skipped != 0 || len(report.Failed) != lines || index != 0 {
		t.Fatalf("report: %d created, %d skipped, %d failed, index %d; want all %d lines failed", report.Created, report.Skipped, len(report.Failed), index, lines)
	}
	for i, f := range report.Failed {
		if f.Line != i+1 {
			t.Fatalf("failure %d is line %d: lines are not reported in order", i, f.Line)
		}
	}
	if first := report.Failed[0].Error; strings.HasPrefix(first, "not attempted") || first == "" {
		t.Errorf("line 1: %q, want the write error", first)
	}
	if last := report.Failed[lines-1].Error; !strings.HasPrefix(last, "not attempted: ") {
		t.Errorf("line %d: %q, want not attempted", lines, last)
	}
	if s.fsm.Len() != 0 {
		t.Errorf("the node holds %d links, want none", s.fsm.Len())
	}
}

// A follower forwards an import whole; the leader's answer names the log
// index the forwarding node must apply before its client hears.
func TestForwardedImportNamesItsIndex(t *testing.T) {
	s := newTestServer(t, nil)
	line := `{"short_code":"fwd-one","original_url":"https://example.com/fwd"}`
	if _, index := importReportOf(t, s, line); index != "" {
		t.Errorf("a client's import carries %s: %q", wire.AppliedIndexHeader, index)
	}
	line = `{"short_code":"fwd-two","original_url":"https://example.com/fwd"}`
	_, raw := importReportOf(t, s, line, wire.ForwardedHeader, "n2")
	index, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || index == 0 || index > s.node.Self.Local().AppliedIndex {
		t.Errorf("%s = %q, want the applied index of the import (applied: %d)", wire.AppliedIndexHeader, raw, s.node.Self.Local().AppliedIndex)
	}
}

var benchImportLine = []byte(`{"short_code":"GUmccMLC","original_url":"https://review-86.fr/articles/review-garden-1?utm_source=newsletter&utm_medium=social&utm_campaign=q3-promo&ref=MJYKy","workspace":"default","expires_at":null}`)

// BenchmarkParseImportLine is one line's whole preparation: decoding and
// the target, code and workspace rules.
func BenchmarkParseImportLine(b *testing.B) {
	api := &transferAPI{input: linkInput{codeLength: 7}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := api.parseImportLine(benchImportLine); err != nil {
			b.Fatal(err)
		}
	}
}

// TestImportKeepsCreationTimesAndClicks: an import line's created_at and
// clicks (or click_count, as an export names it) become the link's, shown
// by every read; they start no hour of its series. What no export can
// hold fails that line alone.
func TestImportKeepsCreationTimesAndClicks(t *testing.T) {
	s := newTestServer(t, nil)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, fields string
		created      string // "" when the link is created now
		clicks       float64
		err          string // "" when the line is created
	}{
		{"both", `"created_at":"2020-05-01T12:00:00Z","clicks":42`, "2020-05-01T12:00:00.000Z", 42, ""},
		{"an export's line", `"created_at":"2021-03-04T05:06:07.123Z","click_count":7,"last_accessed_at":"2021-04-01T00:00:00Z"`, "2021-03-04T05:06:07.123Z", 7, ""},
		{"another zone", `"created_at":"2020-05-01T14:00:00+02:00"`, "2020-05-01T12:00:00.000Z", 0, ""},
		{"both names, one total", `"clicks":5,"click_count":5`, "", 5, ""},
		{"nulls", `"created_at":null,"clicks":null`, "", 0, ""},
		{"the largest total", `"clicks":1000000000000`, "", 1e12, ""},
		{"both names, two totals", `"clicks":5,"click_count":6`, "", 0, "clicks and click_count differ"},
		{"negative clicks", `"clicks":-1`, "", 0, "clicks must be a whole number from 0 to 1000000000000"},
		{"a fraction", `"clicks":1.5`, "", 0, "clicks must be a whole number"},
		{"an exponent", `"click_count":1e3`, "", 0, "click_count must be a whole number"},
		{"a string", `"clicks":"5"`, "", 0, "clicks must be a whole number"},
		{"more clicks than any link had", `"clicks":1000000000001`, "", 0, "clicks must be a whole number"},
		{"not a time", `"created_at":"2020-05-01 12:00:00"`, "", 0, "created_at is not an RFC 3339 time"},
		{"1970", `"created_at":"1970-01-01T00:00:00Z"`, "", 0, "created_at must be after 1970-01-01T00:00:00Z"},
		{"before 1970", `"created_at":"1969-07-20T20:17:00Z"`, "", 0, "created_at must be after 1970"},
		{"in the future", `"created_at":"` + future + `"`, "", 0, "created_at " + future + " is in the future"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := "imp-" + strings.NewReplacer(" ", "-", ",", "", "'", "").Replace(tc.name)
			before := time.Now().UTC()
			report, _ := importReportOf(t, s, `{"short_code":"`+code+`","original_url":"https://example.com/`+code+`",`+tc.fields+"}\n")
			if tc.err != "" {
				if report.Created != 0 || len(report.Failed) != 1 || !strings.Contains(report.Failed[0].Error, tc.err) {
					t.Fatalf("report %+v, want line 1 failed: %s", report, tc.err)
				}
				if _, ok := s.fsm.Get(code); ok {
					t.Fatal("the refused line created its link")
				}
				return
			}
			if report.Created != 1 {
				t.Fatalf("report %+v, want the line created", report)
			}
			read := body(t, do(s, "GET", "/api/v1/urls/"+code, "", ""))
			stats := body(t, do(s, "GET", "/api/v1/urls/"+code+"/stats", "", ""))
			created := tc.created
			if created == "" {
				at, err := time.Parse(time.RFC3339, read["created_at"].(string))
				if err != nil || at.Before(before.Truncate(time.Millisecond)) || at.After(time.Now()) {
					t.Fatalf("created_at %v, want the time of the import", read["created_at"])
				}
				created = read["created_at"].(string)
			}
			if read["created_at"] != created || read["click_count"] != tc.clicks || read["last_accessed_at"] != nil {
				t.Errorf("read %v, want created_at %s, click_count %v, never accessed", read, created, tc.clicks)
			}
			if stats["created_at"] != created || stats["clicks"] != tc.clicks {
				t.Errorf("stats %v, want created_at %s, clicks %v", stats, created, tc.clicks)
			}
			for _, p := range stats["series"].([]any) {
				if p.(map[string]any)["clicks"] != 0.0 {
					t.Fatalf("imported clicks fell in the hourly series: %v", stats["series"])
				}
			}
		})
	}
}

// TestCreateRefusesImportOnlyFields: a creation time and a click total
// are an import's to set; every create route refuses them as it refuses
// any field it does not have, and stores nothing.
func TestCreateRefusesImportOnlyFields(t *testing.T) {
	s := newTestServer(t, nil)
	for _, tc := range []struct{ name, path, contentType, body, field string }{
		{"json created_at", "/api/v1/urls", "application/json", `{"url":"https://example.com/","custom_code":"refused","created_at":"2020-01-01T00:00:00Z"}`, "created_at"},
		{"json clicks", "/api/v1/urls", "application/json", `{"url":"https://example.com/","custom_code":"refused","clicks":5}`, "clicks"},
		{"json click_count", "/shorten", "application/json", `{"url":"https://example.com/","custom_code":"refused","click_count":5}`, "click_count"},
		{"workspace route", "/api/v1/workspaces/team/links", "application/json", `{"url":"https://example.com/","custom_code":"refused","clicks":5}`, "clicks"},
		{"form", "/api/v1/urls", "application/x-www-form-urlencoded", `url=https%3A%2F%2Fexample.com%2F&custom_code=refused&created_at=2020-01-01T00%3A00%3A00Z`, "created_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := do(s, "POST", tc.path, tc.contentType, tc.body)
			if status(ctx) != 400 || !strings.Contains(string(ctx.Response.Body()), "unknown field") || !strings.Contains(string(ctx.Response.Body()), tc.field) {
				t.Fatalf("%d %s, want 400: unknown field %s", status(ctx), ctx.Response.Body(), tc.field)
			}
		})
	}
	ctx := do(s, "POST", "/api/v1/urls/bulk", "application/json", `{"links":[{"url":"https://example.com/","custom_code":"refused","created_at":"2020-01-01T00:00:00Z","clicks":5}]}`)
	if results, _ := body(t, ctx)["results"].([]any); status(ctx) != 200 || len(results) != 1 || results[0].(map[string]any)["status"] != 400.0 {
		t.Fatalf("bulk create with created_at and clicks: %d %s, want its item refused with 400", status(ctx), ctx.Response.Body())
	}
	if s.fsm.Len() != 0 {
		t.Fatalf("a refused create stored %d links", s.fsm.Len())
	}
}

// TestImportRefusesUnknownFields: a line with a field an import does not
// have (here a password hash, which a build that ignored it imported as an
// open link) is refused and creates nothing; the fields an export writes
// and an import does not take are not refused, so an export imports whole.
func TestImportRefusesUnknownFields(t *testing.T) {
	s := newTestServer(t, nil)
	report, _ := importReportOf(t, s,
		`{"short_code":"secret1","original_url":"https://example.com/secret","password_hash":"$2a$10$abcdefghijklmnopqrstuv"}`)
	if report.Created != 0 || len(report.Failed) != 1 || !strings.Contains(report.Failed[0].Error, `unknown field "password_hash"`) {
		t.Fatalf("report %+v, want the line refused for its unknown field", report)
	}
	if got := do(s, "GET", "/secret1", "", "").Response.StatusCode(); got != 404 {
		t.Fatalf("GET /secret1 after the refused line: %d, want 404", got)
	}

	mustCreate(t, s, `{"url":"https://example.com/kept","custom_code":"kept","title":"Kept","tags":["a"]}`)
	export := do(s, "GET", "/admin/export", "", "")
	if export.Response.StatusCode() != 200 {
		t.Fatalf("export: %d", export.Response.StatusCode())
	}
	fresh := newTestServer(t, nil)
	report, _ = importReportOf(t, fresh, string(export.Response.Body()))
	if report.Created != 1 || len(report.Failed) != 0 {
		t.Fatalf("importing an export: %+v, want its one link created", report)
	}
	requireRedirect(t, fresh, "kept", "https://example.com/kept")
}

// TestImportOfItsOwnExport: importing what export wrote changes nothing and
// reports every line skipped, a link in a registered domain too (its code
// is looked up in that domain, not the default one).
func TestImportOfItsOwnExport(t *testing.T) {
	s := newTestServer(t, nil)
	if ctx := do(s, "POST", "/admin/domains", "application/json", `{"domain":"go.example.com"}`); ctx.Response.StatusCode() >= 300 {
		t.Fatalf("register domain: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	mustCreate(t, s, `{"url":"https://example.com/plain","custom_code":"launch"}`)
	mustCreate(t, s, `{"url":"https://example.com/go","custom_code":"launch","domain":"go.example.com"}`)
	export := do(s, "GET", "/admin/export", "", "")
	if export.Response.StatusCode() != 200 {
		t.Fatalf("export: %d %s", export.Response.StatusCode(), export.Response.Body())
	}
	report, _ := importReportOf(t, s, string(export.Response.Body()))
	if report.Created != 0 || report.Skipped != 2 || len(report.Failed) != 0 {
		t.Errorf("import of its own export: %+v, want 2 skipped", report)
	}
}

// TestExportReadsEveryPage: an export of more links than it reads at a
// time writes each live link once, oldest first, a deleted one not at all.
func TestExportReadsEveryPage(t *testing.T) {
	s := newTestServer(t, nil)
	const links = 2*exportPage + 100
	var body strings.Builder
	for i := range links {
		fmt.Fprintf(&body, `{"short_code":"p%05d","original_url":"https://example.com/%d"}`+"\n", i, i)
	}
	if report, _ := importReportOf(t, s, body.String()); report.Created != links {
		t.Fatalf("import: %+v", report)
	}
	if got := do(s, "DELETE", "/api/v1/urls/p01024", "", "").Response.StatusCode(); got != 204 {
		t.Fatalf("delete: %d", got)
	}
	export := do(s, "GET", "/admin/export", "", "")
	lines := strings.Split(strings.TrimSpace(string(export.Response.Body())), "\n")
	if export.Response.StatusCode() != 200 || len(lines) != links-1 {
		t.Fatalf("export: %d, %d lines, want %d", export.Response.StatusCode(), len(lines), links-1)
	}
	for i, line := range lines {
		var l struct {
			ShortCode string `json:"short_code"`
		}
		n := i
		if i >= 1024 {
			n++ // p01024 deleted
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.ShortCode != fmt.Sprintf("p%05d", n) {
			t.Fatalf("line %d: %s (%v), want link p%05d", i+1, line, err, n)
		}
	}
}
