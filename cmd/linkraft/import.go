package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/linkraft/linkraft/migrate"
)

// importCmd is "linkraft import --from FORMAT FILE": it reads another
// shortener's export with package migrate, refuses what the server would
// refuse, and sends the rest to POST /admin/import. The formats and the
// versions they were read from are listed in package migrate's doc.
//
// Lines the server would refuse are never sent, so the dry run and the
// import report the same refusals. Whether a code is already taken on the
// server is not asked code by code in a dry run: the import decides it
// (skipped when the code holds the same URL, failed otherwise), and the
// dry run says so instead of guessing.
func importCmd(args []string, stdout, stderr io.Writer) int {
	var o adminOpts
	fs := newFlagSet("import", "import --from yourls|shlink|kutt|bitly|csv [--workspace W] [--dry-run] FILE [--addr URL] [--key KEY]", stderr)
	o.register(fs, 5*time.Minute)
	from := fs.String("from", "", "the export's format: "+strings.Join(migrate.Formats, ", "))
	workspace := fs.String("workspace", "", "the workspace of links whose export names none (default: default)")
	dryRun := fs.Bool("dry-run", false, "report what would be created, skipped or refused, and send nothing")
	allowPrivate := fs.Bool("allow-private-targets", false, "accept targets inside the network, as a node with --allow-private-targets does")
	pos, code := o.parse(fs, args, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case *from == "":
		return usageError(fs, stderr, "--from is required: %s", strings.Join(migrate.Formats, ", "))
	case len(pos) != 1:
		return usageError(fs, stderr, "give exactly one export file")
	}
	file := pos[0]
	data, err := os.ReadFile(file)
	if err != nil {
		return fail("import", stderr, fmt.Errorf("read the export: %w", err))
	}
	links, problems, err := migrate.Parse(*from, data)
	if err != nil {
		return fail("import", stderr, fmt.Errorf("%s: %w", file, err))
	}
	plan, err := migrate.NewPlan(links, *workspace, *allowPrivate, time.Now())
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	name := filepath.Base(file)
	refused := append(problems, plan.Refused...)
	fmt.Fprintf(stdout, "read %d links from %s (%s)\n", len(links)+len(problems), name, *from)

	if *dryRun {
		return reportDryRun(stdout, name, plan, refused)
	}
	return sendImport(&o, fs, stdout, stderr, name, plan, refused)
}

// reportDryRun says what an import of plan would do; exit 1 when it would
// refuse lines.
func reportDryRun(stdout io.Writer, name string, plan *migrate.Plan, refused []migrate.Problem) int {
	fmt.Fprintf(stdout, "dry run, nothing sent:\n")
	fmt.Fprintf(stdout, "  would create %d (a code the cluster already has is checked at import time: skipped if it holds the same URL, failed otherwise)\n", len(plan.Send))
	fmt.Fprintf(stdout, "  would skip   %d (repeats of an earlier line)\n", len(plan.Skipped))
	fmt.Fprintf(stdout, "  would refuse %d\n", len(refused))
	printProblems(stdout, name, refused)
	printKept(stdout, "would keep", plan.Kept())
	printDropped(stdout, plan.Dropped)
	if len(refused) > 0 {
		return 1
	}
	return 0
}

// sendImport sends plan to POST /admin/import and reports what the
// cluster made of it, with the lines refused before sending; exit 1 when
// a line failed.
func sendImport(o *adminOpts, fs *flag.FlagSet, stdout, stderr io.Writer, name string, plan *migrate.Plan, refused []migrate.Problem) int {
	var report struct {
		Created int `json:"created"`
		Skipped int `json:"skipped"`
		Failed  []struct {
			Line  int    `json:"line"`
			Error string `json:"error"`
		} `json:"failed"`
	}
	if len(plan.Send) > 0 {
		to := o.importTarget(stdout, stderr)
		answer, code := to.call("import", fs, stderr, http.MethodPost, "/admin/import", "application/x-ndjson", plan.Body)
		if code >= 0 {
			return code
		}
		if err := json.Unmarshal(answer, &report); err != nil {
			return fail("import", stderr, fmt.Errorf("the node's answer is not an import report: %w", err))
		}
	}
	failed := refused
	var failedLines []int
	for _, f := range report.Failed {
		failed = append(failed, migrate.Problem{Line: plan.SourceLine(f.Line), Error: f.Error})
		failedLines = append(failedLines, f.Line)
	}
	fmt.Fprintf(stdout, "created %d, skipped %d (already there with the same URL, or repeated in the file), failed %d\n",
		report.Created, report.Skipped+len(plan.Skipped), len(failed))
	printProblems(stdout, name, failed)
	// The report says how many lines were skipped, not which: a skipped
	// link keeps what the cluster already had, so the count is a bound.
	verb := "kept"
	if report.Skipped > 0 {
		verb = "kept at most"
	}
	printKept(stdout, verb, plan.KeptWithout(failedLines))
	printDropped(stdout, plan.Dropped)
	if len(failed) > 0 {
		return 1
	}
	return 0
}

// printProblems lists problems as "file:line: error", in line order.
func printProblems(w io.Writer, file string, ps []migrate.Problem) {
	sorted := slices.Clone(ps)
	slices.SortStableFunc(sorted, func(a, b migrate.Problem) int { return cmp.Compare(a.Line, b.Line) })
	for _, p := range sorted {
		fmt.Fprintf(w, "  %s:%d: %s\n", file, p.Line, p.Error)
	}
}

// printKept says how many of the links sent bring their creation time and
// click total: a format has them for some links only (a YOURLS link never
// clicked), and readers should know what the imported totals are.
func printKept(w io.Writer, verb string, k migrate.Kept) {
	if k == (migrate.Kept{}) {
		return
	}
	fmt.Fprintf(w, "%s creation times: %d, click totals: %d (imported clicks count in a link's total, not in its clicks per hour or visitor breakdowns)\n",
		verb, k.CreatedTimes, k.ClickTotals)
}

// printDropped says which values of the links sent linkraft does not keep,
// and why, so nobody finds out later.
func printDropped(w io.Writer, d migrate.Dropped) {
	if d == (migrate.Dropped{}) {
		return
	}
	fmt.Fprintln(w, "not kept by linkraft (the links are imported without them):")
	if d.Titles > 0 {
		fmt.Fprintf(w, "  %d titles: over 256 characters, or with control characters\n", d.Titles)
	}
	if d.Tags > 0 {
		fmt.Fprintf(w, "  %d tags: not 1-40 of letters, digits, '_', '.' and '-', or past the 10 a link may have\n", d.Tags)
	}
	if d.CreatedTimes > 0 {
		fmt.Fprintf(w, "  %d creation times: before 1970 or in the future; those links are created at the import\n", d.CreatedTimes)
	}
	if d.ClickTotals > 0 {
		fmt.Fprintf(w, "  %d click totals: negative or over 10^12; those links start at 0 clicks\n", d.ClickTotals)
	}
}

// importTarget is where an import goes: to the leader when the node named
// can say which one it is and the leader answers there, else to the node
// named. The leader reads an import as it arrives; any other node reads it
// whole and forwards it, which on a busy machine can cost the leader its
// leadership (docs/API.md). Nothing is sent before the leader answered a
// probe, so a failed try never leaves an import half sent.
func (o *adminOpts) importTarget(stdout, stderr io.Writer) *adminOpts {
	c, err := o.client("import", stderr)
	if err != nil {
		return o // the call reports it
	}
	// The address as given, not where a redirect may have led: a server's
	// http_addr is its plain HTTP one, which a node with TLS sends on to
	// its HTTPS port as the node named did.
	given, err := normalizeAddr(o.addr)
	if err != nil {
		return o
	}
	named, err := url.Parse(given)
	if err != nil {
		return o
	}
	// A follower forwards this question to the leader, so the answer is
	// the leader's view: which server leads, and at what HTTP address.
	answer, err := c.do(http.MethodGet, "/admin/cluster", "", nil)
	var doc clusterDoc
	if err != nil || json.Unmarshal(answer, &doc) != nil {
		return o
	}
	for _, s := range doc.Servers {
		if !s.Leader || s.HTTPAddr == "" || s.HTTPAddr == named.Host {
			continue
		}
		at := *named
		at.Host = s.HTTPAddr // the scheme and any path stay the node named's
		// Options of their own, so each makes its own client (conn nil).
		leader := &adminOpts{connFlags: o.connFlags, key: o.key, token: o.token}
		leader.addr = at.String()
		probe := &adminOpts{connFlags: leader.connFlags, key: o.key, token: o.token}
		probe.timeout = min(probe.timeout, 2*time.Second)
		pc, err := probe.client("import", stderr)
		if err != nil {
			return o
		}
		if _, err := pc.do(http.MethodGet, "/health/live", "", nil); err != nil {
			return o
		}
		fmt.Fprintf(stdout, "sending the import to the leader, %s at %s\n", s.ID, s.HTTPAddr)
		return leader
	}
	return o
}
