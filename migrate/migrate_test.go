package migrate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// want is what a test expects of one parsed link.
type want struct {
	line             int
	code, url, ws    string
	title            string
	tags             int
	clicks           int64
	created, expires bool
}

func TestParseFixtures(t *testing.T) {
	for _, tc := range []struct {
		format, file string
		links        []want
		problems     []int // lines
	}{
		{"yourls", "yourls.json", []want{
			{line: 2, code: "docs", url: "https://example.com/docs?a=1&b=2", title: `Docs — "quoted" title`, clicks: 42, created: true},
			{line: 3, code: "café", url: "https://example.com/café", title: "Café", clicks: 3, created: true},
			{line: 4, code: "ftp1", url: "ftp://files.example.com/x", created: true},
			{line: 5, code: "Zz9", url: "https://example.org/日本", title: "日本", clicks: 7, created: true},
		}, nil},
		{"kutt", "kutt.json", []want{
			{line: 6, code: "launch", url: "https://example.com/launch?utm=kutt", title: `Launch, "day one"`, clicks: 12, created: true, expires: true},
			{line: 19, code: "über", url: "https://example.com/über", created: true},
			{line: 28, code: "local1", url: "http://192.168.1.1/admin", clicks: 1, created: true},
			{line: 36, code: "gone", url: "https://example.com/gone", clicks: 5, created: true, expires: true},
			// A protected link (Kutt's API says only that it has a
			// password) and a banned one are problems: importing either
			// would open what Kutt kept closed.
		}, []int{44, 54}},
		{"bitly", "bitly.json", []want{
			{line: 2, code: "2XyZabc", url: `https://example.com/a,b?q="x"`, title: "Commas, quotes", tags: 2, created: true},
			{line: 3, code: "3Qrs", url: "javascript:alert(1)", created: true},
			{line: 4, code: "api", url: "https://example.com/reserved", title: "a reserved word here", created: true},
		}, nil},
		{"shlink", "shlink.csv", []want{
			{line: 2, code: "q4-report", url: "https://example.com/report?a=1&b=2", title: `Quarterly report, "final"`, tags: 2, clicks: 31, created: true},
			{line: 3, code: "naïve", url: "https://example.com/na%C3%AFve", title: "Ünïcödé", created: true},
			{line: 4, code: "multi", url: "https://example.com/multi", title: "Two\nlines", clicks: 2, created: true},
			{line: 6, code: "nos", url: "example.com/no-scheme", title: "No scheme", created: true},
		}, nil},
		{"csv", "links.csv", []want{
			{line: 2, code: "promo-2030", url: "https://example.com/promo", ws: "marketing", title: "Promo, big", tags: 2, clicks: 100, created: true, expires: true},
			{line: 3, code: "plain", url: "https://example.com/plain"},
			{line: 4, code: "plain", url: "https://example.com/plain"},
			{line: 5, code: "plain", url: "https://example.com/other"},
			{line: 6, code: "bad code!", url: "https://example.com/x"},
			{line: 7, code: "ws-bad", url: "https://example.com/y", ws: "no/slash"},
		}, []int{8}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			links, problems, err := Parse(tc.format, data)
			if err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, l := range links {
				got = append(got, want{line: l.Line, code: l.Code, url: l.URL, ws: l.Workspace, title: l.Title, tags: len(l.Tags),
					clicks: l.Clicks, created: l.CreatedAt != nil, expires: l.ExpiresAt != nil})
			}
			if !slices.Equal(got, tc.links) {
				t.Errorf("links:\n got %+v\nwant %+v", got, tc.links)
			}
			var lines []int
			for _, p := range problems {
				lines = append(lines, p.Line)
			}
			if !slices.Equal(lines, tc.problems) {
				t.Errorf("problems on lines %v (%v), want %v", lines, problems, tc.problems)
			}
		})
	}
}

func TestParseRefusesOtherFiles(t *testing.T) {
	for _, tc := range []struct{ format, data, msg string }{
		{"kutt", `{"links": []}`, `no "data"`},
		{"yourls", `not json`, "not JSON"},
		{"bitly", `"a string"`, "want a JSON object"},
		{"shlink", "a,b\n1,2\n", "no longurl column"},
		{"csv", "short_code\nabc\n", "no originalurl column"},
		{"csv", "\xff\xfe", "not UTF-8"},
		{"tinyurl", "", "unknown format"},
	} {
		if _, _, err := Parse(tc.format, []byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s %q: error %v, want one with %q", tc.format, tc.data, err, tc.msg)
		}
	}
}

// TestParseSeveralPages covers a file of several API answers saved one
// after the other, and a bare list.
func TestParseSeveralPages(t *testing.T) {
	page := `{"data":[{"address":"p%d","target":"https://example.com/%d","created_at":"2024-01-01T00:00:00Z"}],"total":2}`
	data := strings.ReplaceAll(page, "%d", "1") + "\n" + strings.ReplaceAll(page, "%d", "2") + "\n"
	links, _, err := Parse("kutt", []byte(data))
	if err != nil || len(links) != 2 || links[1].Code != "p2" || links[1].Line != 2 {
		t.Fatalf("two pages: %+v %v", links, err)
	}
	links, _, err = Parse("shlink", []byte("createdAt,shortUrl,longUrl,title,tags,visits\n2021-01-01T00:00:00Z,https://s.test/old1,https://example.com/,,\"a,b\",3\n"))
	if err != nil || len(links) != 1 || links[0].Code != "old1" || len(links[0].Tags) != 2 {
		t.Fatalf("an early Shlink export: %+v %v", links, err)
	}
	links, _, err = Parse("bitly", []byte(`[{"link":"https://bit.ly/x1y","long_url":"https://example.com/"}]`))
	if err != nil || len(links) != 1 || links[0].Code != "x1y" {
		t.Fatalf("a bare list: %+v %v", links, err)
	}
}

func TestPlan(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		format, file, workspace string
		send                    []int
		skipped                 []int
		refused                 map[int]string
		kept                    Kept
		dropped                 Dropped
	}{
		{"yourls", "yourls.json", "", []int{2, 3, 5}, nil, // café: a code of letters beyond ASCII
			map[int]string{4: "scheme"}, Kept{CreatedTimes: 3, ClickTotals: 3}, Dropped{}},
		{"kutt", "kutt.json", "team", []int{6, 19}, nil, // über: a code of letters beyond ASCII
			map[int]string{28: "", 36: "expired"}, Kept{CreatedTimes: 2, ClickTotals: 1}, Dropped{}},
		{"bitly", "bitly.json", "", []int{2}, nil, // Bitly's answer has no clicks
			map[int]string{3: "scheme", 4: "reserved"}, Kept{CreatedTimes: 1}, Dropped{Tags: 1}}, // the tag "not one": not a linkraft tag (a space)
		{"shlink", "shlink.csv", "", []int{2, 3, 4}, nil, // naïve: a code of letters beyond ASCII
			map[int]string{6: ""}, Kept{CreatedTimes: 3, ClickTotals: 2}, Dropped{Titles: 1}}, // a title with a line break
		{"csv", "links.csv", "", []int{2, 3}, []int{4},
			map[int]string{5: "line 3", 6: "custom_code", 7: "workspace"}, Kept{CreatedTimes: 1, ClickTotals: 1}, Dropped{}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			links, _, err := Parse(tc.format, data)
			if err != nil {
				t.Fatal(err)
			}
			p, err := NewPlan(links, tc.workspace, false, now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Lines, tc.send) {
				t.Errorf("sends lines %v, want %v", p.Lines, tc.send)
			}
			var skipped []int
			for _, s := range p.Skipped {
				skipped = append(skipped, s.Line)
			}
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skips %v, want %v", p.Skipped, tc.skipped)
			}
			if len(p.Refused) != len(tc.refused) {
				t.Errorf("refused %v, want lines %v", p.Refused, tc.refused)
			}
			for _, r := range p.Refused {
				if msg, ok := tc.refused[r.Line]; !ok || !strings.Contains(r.Error, msg) {
					t.Errorf("refused line %d: %q, want it to say %q", r.Line, r.Error, msg)
				}
			}
			if p.Kept() != tc.kept || p.Dropped != tc.dropped {
				t.Errorf("kept %+v, dropped %+v; want %+v, %+v", p.Kept(), p.Dropped, tc.kept, tc.dropped)
			}
			// The body is the server's import format, one line per link sent.
			body := strings.Split(strings.TrimSuffix(string(p.Body), "\n"), "\n")
			if len(body) != len(p.Send) {
				t.Fatalf("%d body lines for %d links", len(body), len(p.Send))
			}
			for i, line := range body {
				var l struct {
					ShortCode   string  `json:"short_code"`
					OriginalURL string  `json:"original_url"`
					Workspace   string  `json:"workspace"`
					ExpiresAt   *string `json:"expires_at"`
					CreatedAt   *string `json:"created_at"`
					Clicks      int64   `json:"clicks"`
				}
				if err := json.Unmarshal([]byte(line), &l); err != nil || l.ShortCode != p.Send[i].Code || l.OriginalURL != p.Send[i].URL {
					t.Errorf("body line %d %q: %v", i+1, line, err)
				}
				// Creation times and clicks travel as the server reads them.
				if sent := p.Send[i]; l.Clicks != sent.Clicks || (l.CreatedAt == nil) != (sent.CreatedAt == nil) ||
					l.CreatedAt != nil && *l.CreatedAt != sent.CreatedAt.UTC().Format(time.RFC3339Nano) {
					t.Errorf("body line %d %q: want created_at %v and clicks %d", i+1, line, sent.CreatedAt, sent.Clicks)
				}
				if tc.workspace != "" && l.Workspace != tc.workspace {
					t.Errorf("body line %d %q: want workspace %s", i+1, line, tc.workspace)
				}
				if p.SourceLine(i+1) != tc.send[i] {
					t.Errorf("SourceLine(%d) = %d", i+1, p.SourceLine(i+1))
				}
			}
		})
	}
	if _, err := NewPlan(nil, "a b", false, now); err == nil {
		t.Error("a bad --workspace was taken")
	}
}

// TestPlanKeepsHistory: a creation time or click total the server would
// refuse is dropped and counted, and the link is still sent; everything
// else travels as read.
func TestPlanKeepsHistory(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s string) *time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return &tm
	}
	for _, tc := range []struct {
		name          string
		created       *time.Time
		clicks        int64
		wantCreatedAt string // "" when none is sent
		wantClicks    int64
		kept          Kept
		dropped       Dropped
	}{
		{"both", at("2020-05-01T12:00:00+02:00"), 42, "2020-05-01T10:00:00Z", 42, Kept{1, 1}, Dropped{}},
		{"milliseconds", at("2020-05-01T12:00:00.123Z"), 0, "2020-05-01T12:00:00.123Z", 0, Kept{CreatedTimes: 1}, Dropped{}},
		{"neither", nil, 0, "", 0, Kept{}, Dropped{}},
		{"created now", &now, 1, "2026-01-01T00:00:00Z", 1, Kept{1, 1}, Dropped{}},
		{"created in the future", at("2026-01-01T00:00:01Z"), 0, "", 0, Kept{}, Dropped{CreatedTimes: 1}},
		{"created at 1970's first instant", at("1970-01-01T00:00:00Z"), 0, "", 0, Kept{}, Dropped{CreatedTimes: 1}},
		{"created before 1970", at("1969-12-31T23:59:59Z"), 0, "", 0, Kept{}, Dropped{CreatedTimes: 1}},
		{"negative clicks", nil, -3, "", 0, Kept{}, Dropped{ClickTotals: 1}},
		{"the largest total", nil, 1_000_000_000_000, "", 1_000_000_000_000, Kept{ClickTotals: 1}, Dropped{}},
		{"more clicks than any link had", nil, 1_000_000_000_001, "", 0, Kept{}, Dropped{ClickTotals: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan([]Link{{Line: 2, Code: "moved", URL: "https://example.com/", CreatedAt: tc.created, Clicks: tc.clicks}}, "", false, now)
			if err != nil || len(p.Send) != 1 {
				t.Fatalf("plan %+v, %v: want the link sent", p, err)
			}
			if p.Kept() != tc.kept || p.Dropped != tc.dropped {
				t.Errorf("kept %+v, dropped %+v; want %+v, %+v", p.Kept(), p.Dropped, tc.kept, tc.dropped)
			}
			var line struct {
				CreatedAt *string `json:"created_at"`
				Clicks    *int64  `json:"clicks"`
			}
			if err := json.Unmarshal(p.Body, &line); err != nil {
				t.Fatal(err)
			}
			sent := ""
			if line.CreatedAt != nil {
				sent = *line.CreatedAt
			}
			if sent != tc.wantCreatedAt {
				t.Errorf("created_at %q, want %q", sent, tc.wantCreatedAt)
			}
			if tc.wantClicks == 0 && line.Clicks != nil || tc.wantClicks != 0 && (line.Clicks == nil || *line.Clicks != tc.wantClicks) {
				t.Errorf("clicks %v, want %d (none sent for 0)", line.Clicks, tc.wantClicks)
			}
			// What the links the server refused would have kept is not
			// counted as kept.
			if k := p.KeptWithout([]int{1}); k != (Kept{}) {
				t.Errorf("kept without the only line: %+v", k)
			}
		})
	}
}

// TestCheckLinkSchemes: an import takes the targets a create takes: a
// mailto: or app link as it is, never javascript: or file:.
func TestCheckLinkSchemes(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ url, refused string }{
		{"mailto:team@example.com", ""},
		{"fb://profile/33138223345", ""},
		{"https://example.com/", ""},
		{"javascript:alert(1)", "the javascript: scheme is not allowed"},
		{"file:///etc/passwd", "the file: scheme is not allowed"},
	} {
		got, err := checkLink(Link{Code: "abc", URL: tc.url}, false, now)
		switch {
		case tc.refused == "" && (err != nil || got != tc.url):
			t.Errorf("%s: %q, %v; want it kept", tc.url, got, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: %v; want %q", tc.url, err, tc.refused)
		}
	}
}
