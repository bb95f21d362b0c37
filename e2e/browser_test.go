package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserTimeout bounds the whole browser part of TestBrowserUI: page
// loads, typing, and the polls for clicks (which the page picks up on its
// 5 s auto-refresh) and for the cluster table.
const browserTimeout = 45 * time.Second

// chromiumPath finds Debian's chromium. The UI test needs a real browser, so
// its absence is a failure, not a skip: CI installs the package.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: the browser test drives Debian's chromium; install it with `apt-get install chromium` (.ci/run does)")
	return ""
}

// consoleErrors collects what the page logs as an error or throws, so the
// test can require a clean console. The browser itself logs every answer
// with an error status; those the test provokes on purpose are expected.
type consoleErrors struct {
	mu       sync.Mutex
	msgs     []string
	expected []expectedRefusal
}

// expectedRefusal is an error status the test provokes: the browser logs it
// for a request whose URL ends in path.
type expectedRefusal struct {
	status, path string
}

func (c *consoleErrors) expect(status int, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expected = append(c.expected, expectedRefusal{strconv.Itoa(status), path})
}

func (c *consoleErrors) isExpected(m chromedp.ConsoleMessage) bool {
	if m.Source != "network" {
		return false
	}
	for _, e := range c.expected {
		if strings.Contains(m.Text, "status of "+e.status+" ") && strings.HasSuffix(m.URL, e.path) {
			return true
		}
	}
	return false
}

func (c *consoleErrors) watch(ctx context.Context) {
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				c.mu.Lock()
				if !c.isExpected(m) {
					c.msgs = append(c.msgs, m.String()+" ("+m.URL+")")
				}
				c.mu.Unlock()
			}
		}
	}()
}

func (c *consoleErrors) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.msgs...)
}

// TestBrowserUI drives /ui/ in headless chromium against a 3-node cluster:
// a shorten without a key asks for one; with the admin token in the key
// field, shorten a link through the form, follow the short URL the page
// shows, watch the clicks arrive in the link page's chart, switch the chart
// to days, check the layout at phone width, page through the Links view to
// the link and delete another there; filter the Links view by tag, order
// it by clicks, search it and narrow the search with a link's tag; edit a
// link from its row (a refused tag shows the server's reason; then a new
// target, title and rule) and find the link page showing them and both
// targets in its history; shorten three lines at once and read each line's
// outcome; edit a link in a registered domain that shares its code with
// one in the default domain; create a key in the Keys view, use it (it is
// not an admin's), revoke it, then read the cluster view. With
// LINKRAFT_SCREENSHOTS set to a directory it saves ui-link.png,
// ui-links.png, ui-edit.png, ui-keys.png and ui-cluster.png there.
func TestBrowserUI(t *testing.T) {
	skipIfShort(t)
	browser := chromiumPath(t)
	shots := os.Getenv("LINKRAFT_SCREENSHOTS")
	nodes := startCluster(t, 3, nil) // clicks flush every fastFlush
	n := nodes[0]
	base := "http://" + n.httpAddr

	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox, // CI runs as root, where chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	var console consoleErrors
	console.watch(bctx)

	// Without a key the create is refused, and the page says what to do.
	const target = "https://example.com/browser-test?x=1"
	console.expect(http.StatusUnauthorized, "/api/v1/urls")
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("s-url")),
		chromedp.SendKeys(chromedp.ID("s-url"), target),
		chromedp.Click(chromedp.ID("s-go")),
	); err != nil {
		t.Fatalf("shorten without a key: %v", err)
	}
	waitPage(t, bctx, "a shorten without a key asks for one", 5*time.Second,
		`document.querySelector("#s-out [role=alert]")?.textContent.includes("enter a valid API key")`, `document.getElementById("s-out").textContent`)

	useKey(t, bctx, e2eToken)
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("s-go")),
		chromedp.WaitVisible(chromedp.ID("l-short")),
	); err != nil {
		t.Fatalf("shorten through the form: %v", err)
	}
	short, err := chromedp.Run(bctx, chromedp.Poll[string](`document.getElementById("l-short").value`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		t.Fatalf("the link page shows no short URL: %v", err)
	}
	u, err := url.Parse(short)
	if err != nil || u.Host != n.httpAddr || len(strings.Trim(u.Path, "/")) == 0 {
		t.Fatalf("short URL %q: want http://%s/<code> (%v)", short, n.httpAddr, err)
	}
	code := strings.Trim(u.Path, "/")
	hash, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`location.hash`))
	if want := "#/link/" + code; hash != want {
		t.Errorf("after shortening the page is at %q, want %q", hash, want)
	}

	for i := range 3 {
		status, header, _, err := plainDo(n.client, http.MethodGet, short, nil)
		if err != nil || status != http.StatusFound || header.Get("Location") != target {
			t.Fatalf("GET %s (#%d): status %d Location %q err %v; want 302 to %s", short, i+1, status, header.Get("Location"), err, target)
		}
	}

	// The page refreshes itself; no reload or click here.
	waitPage(t, bctx, "the link page's hourly chart shows the 3 clicks", 15*time.Second, `(() => {
		const bars = [...document.querySelectorAll("#l-chart [data-clicks]")];
		const sum = bars.reduce((s, b) => s + Number(b.dataset.clicks), 0);
		return bars.length === 24 && sum === 3 && document.getElementById("l-clicks").textContent === "3";
	})()`, `JSON.stringify({bars: document.querySelectorAll("#l-chart [data-clicks]").length,
		clicks: [...document.querySelectorAll("#l-chart [data-clicks]")].map(b => b.dataset.clicks).join(","),
		total: document.getElementById("l-clicks")?.textContent, msg: document.getElementById("l-msg").textContent})`)

	// The clicks sit in the current hour's bar (or the one before, if the
	// hour turned meanwhile), and that bar says so in its tooltip.
	hot, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](`(() => {
		const b = [...document.querySelectorAll("#l-chart [data-clicks]")].find(b => b.dataset.clicks !== "0");
		return {start: b.dataset.start, title: b.querySelector("title").textContent};
	})()`))
	if err != nil {
		t.Fatalf("read the chart's bar: %v", err)
	}
	start, err := time.Parse(time.RFC3339, hot["start"])
	if age := time.Since(start); err != nil || age < 0 || age > 2*time.Hour {
		t.Errorf("the clicked bar starts at %q, want within the last two hours", hot["start"])
	}
	if !strings.Contains(hot["title"], "3 clicks") {
		t.Errorf("the clicked bar's title is %q, want it to say 3 clicks", hot["title"])
	}
	waitPage(t, bctx, "the QR code image loads", 5*time.Second,
		`document.getElementById("l-qr").complete && document.getElementById("l-qr").naturalWidth > 0`, `document.getElementById("l-qr").src`)
	if shots != "" {
		screenshot(t, bctx, filepath.Join(shots, "ui-link.png"))
	}

	// Copy either reaches the clipboard or, where the browser refuses,
	// leaves the URL selected for the user; the page says which.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("l-copy"))); err != nil {
		t.Fatalf("click Copy: %v", err)
	}
	waitPage(t, bctx, "Copy reports what it did", 5*time.Second,
		`/^(Copied|Selected)/.test(document.getElementById("l-copied").textContent)`, `document.getElementById("l-copied").textContent`)

	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`[data-iv="day"]`))); err != nil {
		t.Fatalf("switch the chart to days: %v", err)
	}
	waitPage(t, bctx, "the daily chart shows 30 days with the 3 clicks", 10*time.Second, `(() => {
		const bars = [...document.querySelectorAll("#l-chart [data-clicks]")];
		return bars.length === 30 && bars.reduce((s, b) => s + Number(b.dataset.clicks), 0) === 3;
	})()`, `document.querySelectorAll("#l-chart [data-clicks]").length + " bars"`)

	// At phone width nothing may push the page sideways.
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(375, 800)); err != nil {
		t.Fatalf("narrow viewport: %v", err)
	}
	fitsPhone(t, bctx, "the link page")

	// The Links view shows every workspace the key sees, newest first, 20
	// at a time: the 20 newer links of another workspace come first, and
	// More brings the first link with its clicks and its page.
	newer := make([]string, 20)
	for i := range newer {
		newer[i] = n.createLink(t, map[string]any{"original_url": "https://example.com/newer/" + strconv.Itoa(i), "workspace": "other"}).ShortCode
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("n-links"))); err != nil {
		t.Fatalf("open the Links view: %v", err)
	}
	waitPage(t, bctx, "the Links view shows the 20 newest links and More", 5*time.Second, `(() => {
		const codes = [...document.querySelectorAll("#ls-list li")].map(li => li.dataset.code);
		return codes.join() === `+jsString(strings.Join(reversed(newer), ","))+` && !document.getElementById("ls-more").hidden;
	})()`, `document.getElementById("v-links").innerText`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("ls-more"))); err != nil {
		t.Fatalf("click More: %v", err)
	}
	waitPage(t, bctx, "More lists the first link", 5*time.Second, `(() => {
		const li = document.querySelector(`+jsString(`#ls-list li[data-code="`+code+`"]`)+`);
		return !!li && li.textContent.includes(`+jsString(target)+`) && li.textContent.includes(`+jsString(short)+`) &&
			li.textContent.includes("workspace default") && li.textContent.includes("3 clicks") &&
			li.querySelector(`+jsString(`a[href="#/link/`+code+`"]`)+`) !== null;
	})()`, `document.getElementById("v-links").innerText`)
	fitsPhone(t, bctx, "the Links view")

	// Delete asks first; then the link leaves the list and the cluster.
	doomed := `#ls-list li[data-code="` + newer[0] + `"]`
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(doomed+` button[aria-label^="Delete"]`)),
		chromedp.Click(chromedp.CSS(doomed+` button.danger`)),
	); err != nil {
		t.Fatalf("delete a link in the Links view: %v", err)
	}
	waitPage(t, bctx, "the deleted link leaves the list", 5*time.Second,
		`!document.querySelector(`+jsString(doomed)+`) && document.getElementById("ls-msg").textContent.includes("Deleted link")`,
		`document.getElementById("v-links").innerText`)
	if r := n.get(t, "/api/v1/urls/"+newer[0]); r.status != http.StatusNotFound {
		t.Errorf("GET the link deleted in the UI: %d, want 404", r.status)
	}

	// Links with titles, tags and options, made through the API, for the
	// Links view's search and tag filter and for the edit form.
	alpha := n.createLink(t, map[string]any{"original_url": "https://example.com/docs/alpha", "title": "Alpha guide", "tags": []string{"docs", "team-a"}}).ShortCode
	beta := n.createLink(t, map[string]any{"original_url": "https://example.com/blog/beta", "title": "Beta post", "tags": []string{"blog"}}).ShortCode
	gamma := n.createLink(t, map[string]any{"original_url": "https://example.com/docs/gamma", "tags": []string{"docs"}, "password": "gamma-secret", "max_visits": 5}).ShortCode
	rowCodes := `[...document.querySelectorAll("#ls-list li")].map(li => li.dataset.code).join()`
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Click(chromedp.ID("n-home")),
		chromedp.Click(chromedp.ID("n-links")),
	); err != nil {
		t.Fatalf("reopen the Links view: %v", err)
	}
	// The tag filter offers each tag with its number of links; choosing
	// one lists its links.
	waitPage(t, bctx, "the tag filter lists the tags", 5*time.Second,
		`[...document.getElementById("ls-tag").options].map(o => o.textContent).join() === "Any tag,blog (1 link),docs (2 links),team-a (1 link)"`,
		`[...document.getElementById("ls-tag").options].map(o => o.textContent).join()`)
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("ls-tag"), "blog"),
		chromedp.Click(chromedp.CSS(`#f-ls button[type=submit]`)),
	); err != nil {
		t.Fatalf("filter by tag: %v", err)
	}
	waitPage(t, bctx, "the blog tag lists the one blog link", 5*time.Second,
		rowCodes+` === `+jsString(beta)+` && document.querySelector("#ls-list li .lt")?.textContent === "Beta post"`, rowCodes)
	// Most clicks first: the link clicked 3 times leads.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("ls-tag"), ""),
		chromedp.SetValue(chromedp.ID("ls-sort"), "clicks"),
		chromedp.Click(chromedp.CSS(`#f-ls button[type=submit]`)),
	); err != nil {
		t.Fatalf("sort by clicks: %v", err)
	}
	waitPage(t, bctx, "sorted by clicks, the clicked link comes first", 5*time.Second,
		`document.querySelector("#ls-list li")?.dataset.code === `+jsString(code)+` && document.querySelectorAll("#ls-list li").length === 20`, rowCodes)
	// Typing searches codes, targets and titles as it goes.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("ls-sort"), "created"),
		chromedp.SendKeys(chromedp.ID("ls-q"), "docs"),
	); err != nil {
		t.Fatalf("search: %v", err)
	}
	waitPage(t, bctx, "searching for docs lists the two docs links, with their title, tags, lock and visit limit", 5*time.Second, `(() => {
		const li = code => document.querySelector('#ls-list li[data-code="' + code + '"]'), a = li(`+jsString(alpha)+`), g = li(`+jsString(gamma)+`);
		const chips = li => [...li.querySelectorAll(".chip")].map(c => c.textContent).join();
		return `+rowCodes+` === `+jsString(gamma+","+alpha)+` &&
			a.querySelector(".lt")?.textContent === "Alpha guide" && chips(a) === "docs,team-a" && !a.querySelector("[data-flag=password]") &&
			!g.querySelector(".lt") && chips(g) === "docs" && !!g.querySelector("[data-flag=password]") && g.textContent.includes("at most 5 visits") &&
			!/\b(null|undefined)\b/.test(a.textContent + g.textContent);
	})()`, `document.getElementById("v-links").innerText`)
	if shots != "" {
		screenshot(t, bctx, filepath.Join(shots, "ui-links.png"))
	}
	// A tag on a row filters by it, the search kept.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#ls-list li[data-code="`+alpha+`"] button.chip:nth-child(2)`))); err != nil {
		t.Fatalf("click the team-a tag: %v", err)
	}
	waitPage(t, bctx, "the team-a tag narrows the search to its link", 5*time.Second,
		rowCodes+` === `+jsString(alpha)+` && document.getElementById("ls-tag").value === "team-a" && document.getElementById("ls-q").value === "docs"`, rowCodes)

	// The row's Edit opens the form filled with the link; a refusal shows
	// the server's detail.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#ls-list li[data-code="`+alpha+`"] a[aria-label^="Edit"]`))); err != nil {
		t.Fatalf("click Edit: %v", err)
	}
	waitPage(t, bctx, "the edit form shows the link", 5*time.Second, `(() => {
		const v = id => document.getElementById(id).value;
		return !document.getElementById("f-e").hidden && v("e-url") === "https://example.com/docs/alpha" && v("e-title") === "Alpha guide" &&
			v("e-tags") === "docs, team-a" && v("e-exp") === "" && v("e-max") === "" && document.getElementById("e-pw-rm").disabled;
	})()`, `document.getElementById("v-edit").innerText`)
	console.expect(http.StatusBadRequest, "/api/v1/urls/"+alpha)
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("e-tags"), "docs, bad tag!"),
		chromedp.Click(chromedp.ID("e-save")),
	); err != nil {
		t.Fatalf("save a bad tag: %v", err)
	}
	waitPage(t, bctx, "the form shows why the server refused the tag", 5*time.Second,
		`document.querySelector("#e-out [role=alert]")?.textContent.includes('"bad tag!"')`, `document.getElementById("e-out").textContent`)
	const newTarget = "https://example.com/docs/alpha-v2"
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("e-tags"), "docs, team-a"),
		chromedp.SetValue(chromedp.ID("e-url"), newTarget),
		chromedp.SetValue(chromedp.ID("e-title"), "Alpha guide, second edition"),
		chromedp.Click(chromedp.ID("e-add")),
		chromedp.SetValue(chromedp.CSS(`#e-rows select`), "ios"),
		chromedp.SetValue(chromedp.CSS(`#e-rows input[type=url]`), "https://apps.apple.com/app/alpha"),
	); err != nil {
		t.Fatalf("fill the edit form: %v", err)
	}
	if shots != "" {
		if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 1400)); err != nil {
			t.Fatalf("tall viewport: %v", err)
		}
		screenshot(t, bctx, filepath.Join(shots, "ui-edit.png"))
	}
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(375, 800)); err != nil {
		t.Fatalf("narrow viewport: %v", err)
	}
	fitsPhone(t, bctx, "the edit form")
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Click(chromedp.ID("e-save")),
	); err != nil {
		t.Fatalf("save the edit: %v", err)
	}
	// Saved, the link page names the fields sent (only the changed ones:
	// the tags are back as they were) and shows the new target, the rule
	// and both targets in the history.
	waitPage(t, bctx, "the link page shows the edited link and its two-entry history", 10*time.Second, `(() => {
		const txt = id => document.getElementById(id)?.textContent;
		return location.hash === `+jsString("#/link/"+alpha)+` && !document.getElementById("l-hist").hidden &&
			txt("l-target") === `+jsString(newTarget)+` && txt("l-title") === "Alpha guide, second edition" &&
			txt("l-rules")?.includes("device ios") && txt("l-msg") === "Saved: original url, title, rules." &&
			[...document.querySelectorAll("#l-versions li")].map(li => li.dataset.url).join() === `+jsString("https://example.com/docs/alpha,"+newTarget)+` &&
			document.querySelector("#l-versions li:last-child")?.textContent.includes("current");
	})()`, `document.getElementById("v-link").innerText`)
	var edited struct {
		OriginalURL string   `json:"original_url"`
		Title       string   `json:"title"`
		Tags        []string `json:"tags"`
		Rules       []struct {
			When map[string]any `json:"when"`
			URL  string         `json:"url"`
		} `json:"rules"`
	}
	if r := n.get(t, "/api/v1/urls/"+alpha); r.status != http.StatusOK || json.Unmarshal(r.body, &edited) != nil {
		t.Fatalf("GET the edited link: %v", r)
	}
	if edited.OriginalURL != newTarget || edited.Title != "Alpha guide, second edition" || strings.Join(edited.Tags, ",") != "docs,team-a" ||
		len(edited.Rules) != 1 || edited.Rules[0].When["device"] != "ios" || edited.Rules[0].URL != "https://apps.apple.com/app/alpha" {
		t.Errorf("after the UI's edit the link is %+v", edited)
	}

	// Shorten many: each line shows its short URL or why it failed.
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("n-home")),
		chromedp.WaitVisible(chromedp.ID("b-lines")),
		chromedp.SetValue(chromedp.ID("b-lines"), "https://example.com/bulk/one\n\nhttps://example.com/bulk/two bulk-two\nhttps://example.com/bulk/three "+code+"\n"),
		chromedp.Click(chromedp.ID("b-go")),
	); err != nil {
		t.Fatalf("shorten many: %v", err)
	}
	waitPage(t, bctx, "each bulk line shows its outcome", 5*time.Second, `(() => {
		const li = [...document.querySelectorAll("#b-results li")];
		return li.length === 3 && li.map(l => l.dataset.line + ":" + l.dataset.status).join() === "1:201,3:201,4:409" &&
			/^\/\w+$/.test(li[0].querySelector("a")?.textContent.replace(`+jsString(base)+`, "")) &&
			li[1].querySelector("a")?.textContent === `+jsString(base+"/bulk-two")+` &&
			li[2].querySelector(".err")?.textContent.includes("already taken") &&
			document.getElementById("b-out").textContent.startsWith("2 of 3 lines shortened");
	})()`, `document.getElementById("b-out").innerText`)
	n.requireRedirect(t, "bulk-two", "https://example.com/bulk/two")

	// A link in a registered domain may share its code with one in the
	// default domain: its row, link page (QR included) and edit name the
	// domain, and the other link is left alone.
	if r := n.postJSON(t, "/admin/domains", map[string]any{"domain": "go.example.com"}); r.status != http.StatusOK {
		t.Fatalf("register a domain: %v", r)
	}
	n.createLink(t, map[string]any{"original_url": "https://example.com/on-domain", "custom_code": "twin", "domain": "go.example.com"})
	n.createLink(t, map[string]any{"original_url": "https://example.com/off-domain", "custom_code": "twin"})
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.ID("n-links")),
		chromedp.SetValue(chromedp.ID("ls-tag"), ""),
		chromedp.SetValue(chromedp.ID("ls-q"), "twin"),
	); err != nil {
		t.Fatalf("search for the twins: %v", err)
	}
	domainRow := `#ls-list li[data-code="twin"][data-domain="go.example.com"]`
	waitPage(t, bctx, "both twins are listed, one in its domain", 5*time.Second,
		`document.querySelectorAll('#ls-list li[data-code="twin"]').length === 2 && document.querySelector(`+jsString(domainRow)+`)?.textContent.includes("domain go.example.com")`,
		`document.getElementById("v-links").innerText`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(domainRow+` a[aria-label^="Edit"]`))); err != nil {
		t.Fatalf("edit the domain's link: %v", err)
	}
	waitPage(t, bctx, "the edit form shows the domain's link", 5*time.Second,
		`!document.getElementById("f-e").hidden && document.getElementById("e-url").value === "https://example.com/on-domain"`, `document.getElementById("v-edit").innerText`)
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("e-title"), "On the domain"),
		chromedp.Click(chromedp.ID("e-save")),
	); err != nil {
		t.Fatalf("save the domain's link: %v", err)
	}
	waitPage(t, bctx, "the domain's link page shows the edit and its QR code", 5*time.Second,
		`location.hash === "#/link/twin?domain=go.example.com" && document.getElementById("l-title")?.textContent === "On the domain" &&
			document.getElementById("l-qr").complete && document.getElementById("l-qr").naturalWidth > 0`, `document.getElementById("v-link").innerText`)
	var twin struct {
		Title string `json:"title"`
	}
	if r := n.get(t, "/api/v1/urls/twin"); r.status != http.StatusOK || json.Unmarshal(r.body, &twin) != nil || twin.Title != "" {
		t.Errorf("the default domain's twin after editing the other: %v", r)
	}

	// Visits: two Chrome-on-Windows clicks from a news site, one from
	// Safari on an iPhone and a Slack preview show in the link page's
	// breakdown cards, the preview apart; the overview of the link's
	// workspace totals them.
	visited := n.createLink(t, map[string]any{"original_url": "https://example.com/visited", "workspace": "visits", "tags": []string{"launch"}}).ShortCode
	for _, v := range []struct{ ua, referer string }{
		{chromeOnWindows, "https://news.example.org/post/1"},
		{chromeOnWindows, "https://news.example.org/post/2"},
		{safariOnIPhone, ""},
		{slackPreview, ""},
	} {
		visit(t, base+"/"+visited, v.ua, v.referer)
	}
	waitVisits(t, n, visited, 10*time.Second)
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/ui/#/link/"+visited)); err != nil {
		t.Fatalf("open the visited link's page: %v", err)
	}
	card := func(by string) string {
		return `[...document.querySelectorAll('#l-vout .card[data-by="` + by + `"] li')].map(li => li.dataset.value + "=" + li.dataset.clicks + ":" + li.textContent).join("|")`
	}
	waitPage(t, bctx, "the link page's cards break the clicks down, the preview apart", 15*time.Second, `(() => {
		return !document.getElementById("l-vis").hidden &&
			`+card("browser")+` === "chrome=2:Chrome2 clicks · 67%|safari=1:Safari1 click · 33%" &&
			`+card("referrer")+` === "news.example.org=2:news.example.org2 clicks · 67%|direct=1:Direct (no referrer)1 click · 33%" &&
			`+card("device")+` === "desktop=2:Desktop2 clicks · 67%|mobile=1:Mobile1 click · 33%" &&
			`+card("os")+`.startsWith("windows=2:Windows") && `+card("country")+` === "XX=3:Unknown3 clicks · 100%" &&
			document.querySelector("#l-vout .bots")?.textContent === "Bots apart: 0 crawlers, 1 preview in the last 30 days." &&
			document.querySelector("#l-vout .vsum")?.textContent.startsWith("3 clicks in the last 30 days") &&
			[...document.querySelectorAll("#l-vout .days [data-clicks]")].length === 30 &&
			[...document.querySelectorAll("#l-vout .days [data-clicks]")].reduce((s, b) => s + Number(b.dataset.clicks) * 10 + Number(b.dataset.bots), 0) === 31;
	})()`, `document.getElementById("v-link").innerText`)
	if shots != "" {
		if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 1100)); err != nil {
			t.Fatalf("tall viewport: %v", err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("l-vis").scrollIntoView({block: "start"})`)); err != nil {
			t.Fatalf("scroll to the visits: %v", err)
		}
		screenshot(t, bctx, filepath.Join(shots, "ui-visits.png"))
	}
	// A card's CSV comes as a file, fetched with the key; the page's
	// hand-over to the browser is watched.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[chromedp.Void](watchDownloads)); err != nil {
		t.Fatalf("watch downloads: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#l-vout .card[data-by="browser"] button.csv`))); err != nil {
		t.Fatalf("download the browsers' CSV: %v", err)
	}
	waitPage(t, bctx, "the browsers' CSV is handed over as a file", 5*time.Second,
		`window.lastDownload?.name === `+jsString(visited+"-browser.csv")+` && window.lastDownload.text === "browser,clicks\nchrome,2\nsafari,1\n"`,
		`JSON.stringify(window.lastDownload) + document.getElementById("l-vout").innerText`)

	// Seven days narrow the chart, not the counts.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#l-vis [data-days="7"]`))); err != nil {
		t.Fatalf("pick 7 days: %v", err)
	}
	waitPage(t, bctx, "seven days show seven bars and the same clicks", 10*time.Second,
		`document.querySelectorAll("#l-vout .days [data-clicks]").length === 7 && document.querySelector("#l-vout .vsum")?.textContent.startsWith("3 clicks in the last 7 days")`,
		`document.getElementById("l-vout").innerText`)
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(375, 800)); err != nil {
		t.Fatalf("narrow viewport: %v", err)
	}
	fitsPhone(t, bctx, "the link page with its visits")

	// The overview of the visits workspace: one link, its 3 clicks, its
	// tag among the choices.
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Click(chromedp.ID("n-overview")),
	); err != nil {
		t.Fatalf("open the overview: %v", err)
	}
	waitPage(t, bctx, "the overview offers the visits workspace and shows every workspace's totals", 10*time.Second,
		`[...document.getElementById("ov-ws").options].some(o => o.value === "visits") && /^\d+$/.test(document.getElementById("ov-links")?.textContent || "")`,
		`document.getElementById("v-overview").innerText`)
	if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.ID("ov-ws"), "visits")); err != nil {
		t.Fatalf("choose the visits workspace: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("ov-ws").dispatchEvent(new Event("change"))`)); err != nil {
		t.Fatalf("announce the workspace: %v", err)
	}
	waitPage(t, bctx, "the overview totals the visits workspace", 10*time.Second, `(() => {
		const txt = id => document.getElementById(id)?.textContent;
		return txt("ov-links") === "1" && txt("ov-clicks") === "3 clicks" && txt("ov-range") === "3 clicks" &&
			[...document.getElementById("ov-tag").options].some(o => o.value === "launch") &&
			`+strings.ReplaceAll(card("browser"), "#l-vout", "#ov-out")+` === "chrome=2:Chrome2 clicks · 67%|safari=1:Safari1 click · 33%" &&
			document.querySelector("#ov-out .bots")?.textContent === "Bots apart: 0 crawlers, 1 preview in the last 30 days.";
	})()`, `document.getElementById("v-overview").innerText`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#ov-out button[aria-label="Download clicks per day as CSV"]`))); err != nil {
		t.Fatalf("download the overview's days: %v", err)
	}
	waitPage(t, bctx, "the overview's CSV has a row per day, bots apart", 5*time.Second, `(() => {
		const d = window.lastDownload, rows = d?.text?.trim().split("\n") || [];
		return d?.name === "stats.csv" && rows[0] === "day,clicks,crawlers,previews" && rows.length === 31 && rows[30].endsWith(",3,0,1");
	})()`, `JSON.stringify(window.lastDownload)`)
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(375, 800)); err != nil {
		t.Fatalf("narrow viewport: %v", err)
	}
	fitsPhone(t, bctx, "the overview")
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("wide viewport: %v", err)
	}

	// The Keys view creates a key and shows its secret once.
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 900),
		chromedp.Click(chromedp.ID("n-keys")),
		chromedp.WaitVisible(chromedp.ID("k-name")),
		chromedp.SendKeys(chromedp.ID("k-name"), "browser test"),
		chromedp.SendKeys(chromedp.ID("k-ws"), "default"),
		chromedp.Click(chromedp.ID("k-create")),
	); err != nil {
		t.Fatalf("create a key in the Keys view: %v", err)
	}
	waitPage(t, bctx, "the Keys view shows the new key's secret and lists the key", 5*time.Second, `(() => {
		const secret = document.getElementById("k-secret").value, id = secret.slice(3, 15);
		return !document.getElementById("k-new").hidden && /^lr_[a-z0-9]{12}_[A-Za-z0-9_-]{43}$/.test(secret) &&
			document.querySelector('#kl-list li[data-id="' + id + '"]')?.textContent.includes("browser test");
	})()`, `document.getElementById("v-keys").innerText`)
	secret, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("k-secret").value`))
	if err != nil {
		t.Fatalf("read the new key: %v", err)
	}
	keyID := secret[3:15]
	if shots != "" {
		screenshot(t, bctx, filepath.Join(shots, "ui-keys.png"))
	}
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(375, 800)); err != nil {
		t.Fatalf("narrow viewport: %v", err)
	}
	fitsPhone(t, bctx, "the Keys view")
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("wide viewport: %v", err)
	}

	// The secret is a working key, but not an admin's: the Keys view says so.
	asKey := http.Header{"Authorization": {"Bearer " + secret}}
	if r := n.request(t, http.MethodGet, "/api/v1/urls?workspace=default", asKey, nil); r.status != http.StatusOK || !strings.Contains(string(r.body), code) {
		t.Errorf("GET /api/v1/urls with the new key: %d %s; want 200 listing %s", r.status, r.body, code)
	}
	console.expect(http.StatusForbidden, "/admin/keys")
	useKey(t, bctx, secret)
	waitPage(t, bctx, "the Keys view tells a key without admin that it lacks the scope", 5*time.Second,
		`document.getElementById("kl-msg").textContent.includes("This key lacks the admin scope") && document.getElementById("k-admin").hidden`,
		`document.getElementById("v-keys").innerText`)

	// Back to the admin token: revoking the key removes it from the list,
	// and the key stops working.
	useKey(t, bctx, e2eToken)
	row := `#kl-list li[data-id="` + keyID + `"]`
	if err := chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(row+` button[aria-label^="Revoke"]`)),
		chromedp.Click(chromedp.CSS(row+` button.danger`)),
	); err != nil {
		t.Fatalf("revoke the key: %v", err)
	}
	waitPage(t, bctx, "the revoked key leaves the list", 5*time.Second,
		`!document.querySelector('`+row+`') && document.getElementById("kl-msg").textContent.includes("Revoked key browser test")`,
		`document.getElementById("v-keys").innerText`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := n.request(t, http.MethodGet, "/api/v1/urls", asKey, nil)
		if r.status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/v1/urls with the revoked key: %d, want 401", r.status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("n-cluster"))); err != nil {
		t.Fatalf("open the cluster view: %v", err)
	}
	waitPage(t, bctx, "the cluster view lists 3 reachable nodes and exactly one leader", 15*time.Second, `(() => {
		const rows = [...document.querySelectorAll("#c-table tbody tr")];
		return rows.length === 3 && rows.filter(r => r.dataset.leader === "true").length === 1 &&
			rows.every(r => r.dataset.reachable === "true");
	})()`, `document.getElementById("c-out").innerText`)
	ids, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#c-table tbody tr")].map(r => r.dataset.id).sort()`))
	if err != nil || strings.Join(ids, ",") != "node1,node2,node3" {
		t.Errorf("cluster view rows %v (%v), want node1,node2,node3", ids, err)
	}
	if shots != "" {
		screenshot(t, bctx, filepath.Join(shots, "ui-cluster.png"))
	}

	if errs := console.list(); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// User-Agents of the visits the browser test makes.
const (
	chromeOnWindows = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
	safariOnIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	slackPreview    = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
)

// watchDownloads records in window.lastDownload the name and text of the
// next file the page hands to the browser, and keeps the browser from
// saving it: a test writes nothing outside its own directories.
const watchDownloads = `(() => {
	const create = URL.createObjectURL, click = HTMLAnchorElement.prototype.click;
	URL.createObjectURL = blob => {
		const d = window.lastDownload = {name: null, text: null};
		blob.text().then(t => { d.text = t; });
		return create.call(URL, blob);
	};
	HTMLAnchorElement.prototype.click = function () {
		if (!this.download) return click.call(this);
		if (window.lastDownload) window.lastDownload.name = this.download;
	};
})()`

// visit follows a short URL as a visitor would, with a User-Agent and a
// Referer (none if empty), without following the redirect.
func visit(t *testing.T, short, userAgent, referer string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequest(http.MethodGet, short, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", userAgent)
	if referer != "" {
		req.Header.Set("Referer", referer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("visit %s as %q: %v", short, userAgent, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("visit %s as %q: status %d, want 302", short, userAgent, resp.StatusCode)
	}
}

// waitVisits waits until the node's stats count the test's visits of
// code: 3 clicks and 1 preview, once the node has flushed them (every
// fastFlush).
func waitVisits(t *testing.T, n *node, code string, timeout time.Duration) {
	t.Helper()
	var got struct {
		Visits struct {
			Clicks   int `json:"clicks"`
			Previews int `json:"previews"`
		} `json:"visits"`
	}
	deadline := time.Now().Add(timeout)
	for {
		r := n.get(t, "/api/v1/urls/"+code+"/stats?group_by=browser")
		if r.status == http.StatusOK && json.Unmarshal(r.body, &got) == nil && got.Visits.Clicks == 3 && got.Visits.Previews == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stats of %s do not count 3 clicks and 1 preview within %v: %v", code, timeout, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// useKey enters key in the page's key field and waits until the page uses it.
func useKey(t *testing.T, ctx context.Context, key string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("k-in"), key),
		chromedp.Click(chromedp.ID("k-go")),
	); err != nil {
		t.Fatalf("enter the key: %v", err)
	}
	want := "Using a token"
	if m := keyPattern.FindStringSubmatch(key); m != nil {
		want = "Using key " + m[1]
	}
	waitPage(t, ctx, "the page uses the key", 5*time.Second,
		`document.getElementById("k-state").textContent.startsWith(`+jsString(want)+`)`, `document.getElementById("k-state").textContent`)
}

var keyPattern = regexp.MustCompile(`^lr_([a-z0-9]{12})_[A-Za-z0-9_-]{43}$`)

// fitsPhone fails unless the page, at 375 px, does not scroll sideways.
func fitsPhone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	waitPage(t, ctx, what+" fits 375 px without scrolling sideways", 5*time.Second,
		`innerWidth === 375 && document.documentElement.scrollWidth <= 375`, `document.documentElement.scrollWidth + " px wide"`)
}

// reversed is s in the opposite order.
func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// waitPage polls a JavaScript predicate in the page until it is true or
// timeout passes; on failure it reports what describe evaluates to.
func waitPage(t *testing.T, ctx context.Context, what string, timeout time.Duration, predicate, describe string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](predicate,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err == nil {
		return
	}
	state, derr := chromedp.Run(ctx, chromedp.Evaluate[string](describe))
	if derr != nil {
		state = "(unreadable: " + derr.Error() + ")"
	}
	t.Fatalf("%s: not within %v (%v); page shows %s", what, timeout, err, state)
}

// screenshot saves the visible viewport as a PNG.
func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("write screenshot: %v", err)
	}
}

// hiddenPattern is the page's own test for hidden characters (app.js
// HIDDEN), for asserting that a view shows none.
const hiddenPattern = `/[\p{Bidi_Control}\p{Default_Ignorable_Code_Point}]/u`

// TestBrowserShowsHiddenCharacters: characters that show nothing of
// themselves but change how the text around them looks (a right-to-left
// override makes "https://example.com/files/‮fdp.exe" read as ending in
// "exe.pdf"; zero-width characters, isolates, marks, the byte order mark)
// are shown by the web UI as their code points, each in a marked span,
// wherever it shows a target: the link page (target, rules, history), the
// Links view and the edit form. The link itself keeps the target as
// stored: the href, the edit field and the redirect. Then the escaping
// function (app.js shown) is tested on its own, in the page, with a table.
func TestBrowserShowsHiddenCharacters(t *testing.T) {
	skipIfShort(t)
	browser := chromiumPath(t)
	n := startNode(t, nodeOptions{})
	base := "http://" + n.httpAddr

	first := "https://example.com/files/\u202Efdp.exe"
	target := "https://example.com/\u200Bpay\u2066ment\u2069/\u200E\u200F\uFEFFinvoice"
	ruleURL := "https://apps.example/\u202Eios"
	l := n.createLink(t, map[string]any{"original_url": first, "rules": []any{
		map[string]any{"when": map[string]any{"device": "ios"}, "url": ruleURL}}})
	if r := n.request(t, http.MethodPatch, "/api/v1/urls/"+l.ShortCode, http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"original_url":`+jsString(target)+`}`)); r.status != http.StatusOK {
		t.Fatalf("edit the target: %v", r)
	}
	if r := n.get(t, "/"+l.ShortCode); r.status != http.StatusFound || r.header.Get("Location") != target {
		t.Fatalf("GET /%s: %v Location %q, want 302 to the target as stored, %q", l.ShortCode, r, r.header.Get("Location"), target)
	}

	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox, // CI runs as root, where chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	var console consoleErrors
	console.watch(bctx)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("k-in")),
	); err != nil {
		t.Fatalf("open the UI: %v", err)
	}

	useKey(t, bctx, e2eToken)
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[chromedp.Void](`location.hash = `+jsString("#/link/"+l.ShortCode))); err != nil {
		t.Fatalf("open the link page: %v", err)
	}
	escaped := `https://example.com/\u200Bpay\u2066ment\u2069/\u200E\u200F\uFEFFinvoice`
	waitPage(t, bctx, "the link page shows the target, its rule and its history with each hidden character as its code point", 10*time.Second, `(() => {
		const txt = id => document.getElementById(id)?.textContent, a = document.querySelector("#l-target a");
		const vs = [...document.querySelectorAll("#l-versions li")];
		return txt("l-target") === `+jsString(escaped)+` && document.querySelectorAll("#l-target span.hid").length === 6 &&
			a?.getAttribute("href") === `+jsString(target)+` &&
			txt("l-rules")?.includes(`+jsString(`https://apps.example/\u202Eios`)+`) &&
			vs.length === 2 && vs[0].textContent.includes(`+jsString(`https://example.com/files/\u202Efdp.exe`)+`) &&
			vs.map(li => li.dataset.url).join() === `+jsString(first+","+target)+` &&
			!`+hiddenPattern+`.test(document.getElementById("v-link").textContent);
	})()`, `JSON.stringify(document.getElementById("v-link").textContent)`)

	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("n-links"))); err != nil {
		t.Fatalf("open the Links view: %v", err)
	}
	row := `document.querySelector(` + jsString(`#ls-list li[data-code="`+l.ShortCode+`"]`) + `)`
	waitPage(t, bctx, "the Links view shows the target with its hidden characters as code points", 5*time.Second,
		`!!`+row+` && `+row+`.textContent.includes(`+jsString(escaped)+`) && `+row+`.querySelectorAll("span.hid").length === 6 && !`+hiddenPattern+`.test(`+row+`.textContent)`,
		`JSON.stringify(document.getElementById("v-links").textContent)`)

	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#ls-list li[data-code="`+l.ShortCode+`"] a[aria-label^="Edit"]`))); err != nil {
		t.Fatalf("click Edit: %v", err)
	}
	waitPage(t, bctx, "the edit form keeps the target as stored and says which hidden characters it holds", 5*time.Second, `(() => {
		const note = document.getElementById("e-url-hid");
		return !document.getElementById("f-e").hidden && document.getElementById("e-url").value === `+jsString(target)+` &&
			!note.hidden && note.textContent.includes(`+jsString(escaped)+`) && note.querySelectorAll("span.hid").length === 6;
	})()`, `JSON.stringify({url: document.getElementById("e-url").value, note: document.getElementById("e-url-hid").textContent})`)
	// A URL typed without them retires the note (typing fires the input
	// event the note listens to; setting the value does not).
	if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.ID("e-url"), "https://example.com/plai"), chromedp.SendKeys(chromedp.ID("e-url"), "n")); err != nil {
		t.Fatalf("type a plain URL: %v", err)
	}
	waitPage(t, bctx, "a plain URL in the edit form has no note", 5*time.Second,
		`document.getElementById("e-url-hid").hidden`, `document.getElementById("e-url-hid").textContent`)

	// shown, as the page renders a URL: the text a user reads, and how
	// many marked spans it holds.
	type rendered struct {
		Text  string `json:"text"`
		Marks int    `json:"marks"`
	}
	for _, tc := range []struct {
		name, in string
		want     rendered
	}{
		{"plain ASCII", "https://example.com/a?b=c#d", rendered{"https://example.com/a?b=c#d", 0}},
		{"visible non-ASCII, right-to-left letters included", "https://example.com/ünïcödé/日本/עברית", rendered{"https://example.com/ünïcödé/日本/עברית", 0}},
		{"right-to-left override", first, rendered{`https://example.com/files/\u202Efdp.exe`, 1}},
		{"embeddings, overrides and their end", "a\u202A\u202B\u202C\u202Db", rendered{`a\u202A\u202B\u202C\u202Db`, 4}},
		{"isolates", "\u2066a\u2067b\u2068c\u2069", rendered{`\u2066a\u2067b\u2068c\u2069`, 4}},
		{"marks", "x\u200Ey\u200Fz\u061C", rendered{`x\u200Ey\u200Fz\u061C`, 3}},
		{"zero-width space, joiners, word joiner", "a\u200B\u200C\u200D\u2060b", rendered{`a\u200B\u200C\u200D\u2060b`, 4}},
		{"byte order mark first", "\uFEFFhttps://example.com/", rendered{`\uFEFFhttps://example.com/`, 1}},
		{"soft hyphen and a Hangul filler", "ex\u00ADample\u3164", rendered{`ex\u00ADample\u3164`, 2}},
		{"a tag character, outside the BMP", "a\U000E0041b", rendered{`a\u{E0041}b`, 1}},
	} {
		got, err := chromedp.Run(bctx, chromedp.Evaluate[rendered](`(() => {
			const d = document.createElement("div");
			d.append(shown(`+jsString(tc.in)+`));
			return {text: d.textContent, marks: d.querySelectorAll("span.hid").length};
		})()`))
		if err != nil {
			t.Fatalf("%s: shown in the page: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: shown(%q) reads %q with %d marked, want %q with %d", tc.name, tc.in, got.Text, got.Marks, tc.want.Text, tc.want.Marks)
		}
	}

	if errs := console.list(); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
