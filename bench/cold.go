package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"time"
)

// ColdConfig is a run of cold redirects: Count distinct links picked at
// random from an import file, each read once, one request at a time, so
// that each request's latency is its own (no queue, no neighbour) and a
// node's caches meet every code for the first time.
type ColdConfig struct {
	Target string // one node, host:port or http://host:port
	// Links is a file of the NDJSON that POST /admin/import takes, one link
	// a line, each with its short_code and original_url.
	Links string
	Count int
	// Seed picks the sample: the same seed and file give the same codes in
	// the same order, so that two builds are timed on the same requests.
	Seed    uint64
	Timeout time.Duration // per request
}

// ColdResult is what a cold run measured. The latencies cover every
// request that got an HTTP answer, right or wrong.
type ColdResult struct {
	Requests   int
	Redirected int // a redirect status with the imported URL as Location
	Failed     int
	// FirstFailure says which code failed first and how.
	FirstFailure  string
	P50, P99, Max time.Duration
}

// String is the run as one line, p99 first: the figure docs/SCALING.md
// bounds and compares between builds.
func (r *ColdResult) String() string {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	s := fmt.Sprintf("p99 %.2f ms  p50 %.2f ms  max %.2f ms  (%d of %d distinct codes redirected to their URLs, one at a time)",
		ms(r.P99), ms(r.P50), ms(r.Max), r.Redirected, r.Requests)
	if r.Failed > 0 {
		s += fmt.Sprintf("; %d failed, the first: %s", r.Failed, r.FirstFailure)
	}
	return s
}

// coldLink is one sampled line of the import file.
type coldLink struct {
	Code string `json:"short_code"`
	URL  string `json:"original_url"`
}

// ColdRedirects sends cfg.Count GETs of distinct codes sampled from
// cfg.Links to cfg.Target, one at a time, and checks that each answers a
// redirect status (any --redirect-status) to the code's imported URL.
// Before the first, one GET /health opens the connection, so that no
// sample's time includes a TCP handshake. Cancelling ctx ends the run with
// an error.
func ColdRedirects(ctx context.Context, cfg ColdConfig) (*ColdResult, error) {
	addrs, err := normaliseTargets([]string{cfg.Target})
	if err != nil {
		return nil, fmt.Errorf("cold redirects: %w", err)
	}
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("cold redirects: timeout must be positive, got %v", cfg.Timeout)
	}
	links, err := sampleLinks(cfg.Links, cfg.Count, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("cold redirects: %w", err)
	}
	tgt := newTargets(addrs, 1)[0]
	defer closeTargets([]*target{tgt})
	c := newConn(cfg.Timeout, "", "")
	// opRedirect of "health" is GET /health: it reads no link.
	if _, err := c.send(tgt, opRedirect, "health", nil); err != nil {
		return nil, fmt.Errorf("cold redirects: opening the connection to %s: %w", tgt.addr, err)
	}
	res := &ColdResult{}
	took := make([]time.Duration, 0, len(links))
	for _, l := range links {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cold redirects: after %d of %d: %w", res.Requests, len(links), err)
		}
		start := time.Now()
		status, err := c.send(tgt, opRedirect, l.Code, nil)
		d := time.Since(start)
		res.Requests++
		if err == nil {
			took = append(took, d)
		}
		if failure := c.checkRedirect(l, status, err); failure != "" {
			res.Failed++
			if res.FirstFailure == "" {
				res.FirstFailure = failure
			}
			continue
		}
		res.Redirected++
	}
	res.P50, res.P99, res.Max = percentile(took, 50), percentile(took, 99), percentile(took, 100)
	return res, nil
}

// checkRedirect says what is wrong with the answer to a GET of l.Code,
// or "" when it redirects to l.URL.
func (c *conn) checkRedirect(l coldLink, status int, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("/%s: %v", l.Code, err)
	case !opRedirect.ok(status):
		return fmt.Sprintf("/%s answered %d", l.Code, status)
	}
	if loc := c.resp.Header.Peek("Location"); string(loc) != l.URL {
		return fmt.Sprintf("/%s redirected to %q, not %q", l.Code, loc, l.URL)
	}
	return ""
}

// percentile is the nearest-rank p-th percentile of d (sorted in place);
// 0 for none.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	rank := (len(d)*p + 99) / 100 // ceil(n·p/100), 1-based
	return d[max(rank, 1)-1]
}

// maxImportLine bounds one line of an import file (a link with a long URL,
// title and tags is a few KiB).
const maxImportLine = 1 << 20

// sampleLinks picks n distinct lines of the import file at random (seeded)
// and returns their links in the order they were picked. It reads the file
// twice, to count its lines and then to decode only the picked ones, so
// that a file of tens of millions of links costs no memory.
func sampleLinks(path string, n int, seed uint64) ([]coldLink, error) {
	if n < 1 {
		return nil, fmt.Errorf("count must be >= 1, got %d", n)
	}
	lines := 0
	if err := eachLine(path, func(int, []byte) error { lines++; return nil }); err != nil {
		return nil, err
	}
	if n > lines {
		return nil, fmt.Errorf("%s has %d links, fewer than the %d asked for", path, lines, n)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	order := make(map[int]int, n) // line → place in the sample
	for len(order) < n {
		if i := rng.IntN(lines); order[i] == 0 {
			order[i] = len(order) + 1
		}
	}
	out := make([]coldLink, n)
	err := eachLine(path, func(i int, line []byte) error {
		place := order[i]
		if place == 0 {
			return nil
		}
		l := &out[place-1]
		if err := json.Unmarshal(line, l); err != nil {
			return fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		if l.Code == "" || l.URL == "" {
			return fmt.Errorf("%s line %d: a link needs its short_code and original_url to be checked", path, i+1)
		}
		return nil
	})
	return out, err
}

// eachLine calls fn with every non-empty line of the file and its index
// among those lines.
func eachLine(path string, fn func(int, []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("links: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxImportLine)
	i := 0
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := fn(i, sc.Bytes()); err != nil {
			return err
		}
		i++
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("links: reading %s: %w", path, err)
	}
	return nil
}
