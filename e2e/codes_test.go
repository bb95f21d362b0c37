package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math/big"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestCounterCodes covers the default counter strategy: distinct,
// fixed-length base62 codes that reveal no creation order.
func TestCounterCodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	tests := []struct {
		name     string
		settings map[string]string
		length   int
	}{
		{"default length", nil, 7},
		{"code-length 9", map[string]string{"code-length": "9"}, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := startNode(t, nodeOptions{Settings: tc.settings})
			pattern := regexp.MustCompile(`^[0-9A-Za-z]{` + strconv.Itoa(tc.length) + `}$`)
			var codes []string
			seen := map[string]bool{}
			for i := range 50 {
				l := n.createURL(t, "https://example.com/counter/"+itoa(i))
				if !pattern.MatchString(l.ShortCode) {
					t.Errorf("code %q is not %d characters of [0-9A-Za-z]", l.ShortCode, tc.length)
				}
				if seen[l.ShortCode] {
					t.Errorf("code %q handed out twice", l.ShortCode)
				}
				seen[l.ShortCode] = true
				codes = append(codes, l.ShortCode)
			}
			if t.Failed() {
				return
			}
			checkNoVisibleOrder(t, codes, tc.length)
		})
	}
}

// checkNoVisibleOrder fails when codes, listed in creation order, look like
// a counter: sorted, sharing a leading character, or an arithmetic
// progression (which is what a plain counter, an added salt or an affine map
// produce) in any of the usual base62 alphabets.
func checkNoVisibleOrder(t *testing.T, codes []string, length int) {
	t.Helper()
	if sort.StringsAreSorted(codes) {
		t.Errorf("codes come out in ascending order: %v", codes)
	}
	reversed := append([]string(nil), codes...)
	sort.Sort(sort.Reverse(sort.StringSlice(reversed)))
	if strings.Join(reversed, ",") == strings.Join(codes, ",") {
		t.Errorf("codes come out in descending order: %v", codes)
	}

	// A keyed permutation spreads 50 codes over ~34 of 62 leading
	// characters; fewer than 10 happens with negligible probability, while
	// a counter keeps the first character fixed.
	firsts := map[byte]bool{}
	for _, c := range codes {
		firsts[c[0]] = true
	}
	if len(firsts) < 10 {
		t.Errorf("50 codes use only %d different first characters: %v", len(firsts), codes)
	}

	modulus := new(big.Int).Exp(big.NewInt(62), big.NewInt(int64(length)), nil)
	for _, alphabet := range []string{
		"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
		"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
	} {
		var first *big.Int
		constantStep := true
		for i := 1; i < len(codes) && constantStep; i++ {
			step := new(big.Int).Sub(decodeBase62(alphabet, codes[i]), decodeBase62(alphabet, codes[i-1]))
			step.Mod(step, modulus)
			if first == nil {
				first = step
			} else if step.Cmp(first) != 0 {
				constantStep = false
			}
		}
		if constantStep {
			t.Errorf("codes are an arithmetic progression (step %v) in alphabet %s: %v", first, alphabet, codes)
		}
	}
}

func decodeBase62(alphabet, code string) *big.Int {
	v := new(big.Int)
	base := big.NewInt(62)
	for _, r := range code {
		v.Mul(v, base)
		v.Add(v, big.NewInt(int64(strings.IndexRune(alphabet, r))))
	}
	return v
}

// TestCustomCodes covers custom_code: valid vanity codes, the pattern,
// reserved words in any case and codes already taken in any workspace.
func TestCustomCodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	t.Run("valid codes redirect", func(t *testing.T) {
		for _, code := range []string{"my-link_1", "abc", strings.Repeat("Z", 64), "UPPER-lower_09", "ünïcode", "日本語", "\U0001F9A3\U0001F9A3\U0001F9A3"} {
			target := "https://example.com/vanity/" + code
			l := n.createLink(t, map[string]any{"original_url": target, "custom_code": code})
			if l.ShortCode != code || l.ShortURL != "http://"+n.httpAddr+"/"+code {
				t.Errorf("custom_code %q: got short_code %q short_url %q", code, l.ShortCode, l.ShortURL)
			}
			n.requireRedirect(t, code, target)
		}
	})

	before := n.linkCount(t)
	rejected := []struct {
		name string
		code string
		want int
	}{
		{"two characters", "ab", http.StatusBadRequest},
		{"65 characters", strings.Repeat("a", 65), http.StatusBadRequest},
		{"space", "has space", http.StatusBadRequest},
		{"dot", "dot.code", http.StatusBadRequest},
		{"slash", "slash/code", http.StatusBadRequest},
		{"decomposed (NFD) letters", "u\u0308nicode", http.StatusBadRequest},
		{"a right-to-left override", "abc\u202edef", http.StatusBadRequest},
		{"markup", "<script>", http.StatusBadRequest},
		{"percent", "per%20cent", http.StatusBadRequest},
	}
	for _, word := range []string{"api", "admin", "health", "metrics", "ui", "stats", "shorten", "static", "favicon.ico", "robots.txt", "API", "Admin", "HEALTH", "Metrics", "UI", "Favicon.ICO", "ROBOTS.TXT"} {
		rejected = append(rejected, struct {
			name string
			code string
			want int
		}{"reserved " + word, word, http.StatusConflict})
	}
	for _, tc := range rejected {
		t.Run(tc.name, func(t *testing.T) {
			r := n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/rejected", "custom_code": tc.code})
			requireProblem(t, r, tc.want)
		})
	}

	t.Run("taken", func(t *testing.T) {
		n.createLink(t, map[string]any{"original_url": "https://example.com/first-owner", "custom_code": "taken-code"})
		before := n.linkCount(t)
		// Codes are unique across workspaces, so /{code} is never ambiguous.
		for _, ws := range []string{"default", "another-ws"} {
			r := n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/second-owner", "custom_code": "taken-code", "workspace": ws})
			requireProblem(t, r, http.StatusConflict)
		}
		if after := n.linkCount(t); after != before {
			t.Errorf("refused creates changed the link count from %d to %d", before, after)
		}
		n.requireRedirect(t, "taken-code", "https://example.com/first-owner")
	})

	if after := n.linkCount(t); after != before+1 { // +1: the "taken" subtest's first owner
		t.Errorf("link count went from %d to %d; only one create in between succeeded", before, after)
	}
}

// TestDeletedCodesAreNeverReused covers that a deleted code is never handed
// out again, neither as a custom code nor by the counter.
func TestDeletedCodesAreNeverReused(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	counterCode := n.createURL(t, "https://example.com/deleted-counter").ShortCode
	customCode := n.createLink(t, map[string]any{"original_url": "https://example.com/deleted-custom", "custom_code": "gone-code"}).ShortCode
	for _, code := range []string{counterCode, customCode} {
		if r := n.request(t, http.MethodDelete, "/api/v1/urls/"+code, nil, nil); r.status != http.StatusNoContent {
			t.Fatalf("DELETE %s: want 204, got %v", code, r)
		}
	}
	for _, code := range []string{counterCode, customCode} {
		r := n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": "https://example.com/squatter", "custom_code": code})
		requireProblem(t, r, http.StatusConflict)
		requireProblem(t, n.request(t, http.MethodGet, "/"+code, http.Header{"Accept": {"application/json"}}, nil), http.StatusNotFound)
	}
	for i := range 30 {
		if l := n.createURL(t, "https://example.com/after-delete/"+itoa(i)); l.ShortCode == counterCode || l.ShortCode == customCode {
			t.Errorf("deleted code %s handed out again to %s", l.ShortCode, l.OriginalURL)
		}
	}
}

// base58Alphabet is the hash-code alphabet (docs/API.md, hash strategy).
const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// expectedHashCode computes a hash-strategy code independently of the server:
// SHA-256 of canonical + "|" + workspace, first 16 bytes big-endian, Base58,
// left-padded with '1', first 10 characters.
func expectedHashCode(canonical, workspace string) string {
	sum := sha256.Sum256([]byte(canonical + "|" + workspace))
	value := new(big.Int).SetBytes(sum[:16])
	base := big.NewInt(58)
	mod := new(big.Int)
	var digits []byte
	for value.Sign() > 0 {
		value.DivMod(value, base, mod)
		digits = append(digits, base58Alphabet[mod.Int64()])
	}
	for len(digits) < 10 {
		digits = append(digits, base58Alphabet[0])
	}
	for i, j := 0, len(digits)-1; i < j; i, j = i+1, j-1 {
		digits[i], digits[j] = digits[j], digits[i]
	}
	return string(digits[:10])
}

// canonicalGroups are URLs that share a canonical form, written out by hand
// from the canonical form rules of docs/API.md.
var canonicalGroups = []struct {
	name      string
	canonical string
	variants  []string
}{
	{
		name:      "case, default port, trailing slash, double slash, fragment",
		canonical: "http://example.com/path",
		variants: []string{
			"HTTP://Example.com/path",
			"http://example.com/path",
			"http://example.com:80/path",
			"http://example.com/path/",
			"http://example.com//path",
			"http://example.com/path#section",
			"  http://EXAMPLE.COM/path  ",
		},
	},
	{
		name:      "root path and https default port",
		canonical: "https://example.com/",
		variants:  []string{"https://example.com:443/", "https://example.com", "HTTPS://Example.COM/#top"},
	},
	{
		name:      "collapsed slashes",
		canonical: "http://example.com/a/b",
		variants:  []string{"http://example.com//a///b", "http://example.com/a/b/"},
	},
	{
		name:      "sorted query",
		canonical: "http://example.com/path?a=2&z=1",
		variants:  []string{"http://example.com/path?z=1&a=2", "http://example.com/path?a=2&z=1", "http://example.com/path/?z=1&a=2#frag"},
	},
	{
		name:      "three-key query",
		canonical: "http://example.com/search?page=1&q=test&sort=date",
		variants: []string{
			"http://example.com/search?q=test&sort=date&page=1",
			"http://example.com/search?page=1&q=test&sort=date",
			"http://example.com/search?sort=date&page=1&q=test",
		},
	},
	{
		name:      "repeated keys keep their order",
		canonical: "http://example.com/r?a=x&a=y&b=2",
		variants:  []string{"http://example.com/r?b=2&a=x&a=y", "http://example.com/r?a=x&b=2&a=y"},
	},
	{
		name:      "percent-encoded unreserved characters",
		canonical: "http://example.com/~user/docs",
		variants:  []string{"http://example.com/%7Euser/docs", "http://example.com/~user/docs", "http://example.com/%7euser/docs/"},
	},
}

// TestDedupeAndHashCodes covers dedupe and the hash strategy: canonical
// equivalents share one link, workspaces are separate, and hash codes equal
// an independent computation of the algorithm.
func TestDedupeAndHashCodes(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	if got, want := expectedHashCode("http://example.com/path", "ws"), expectedHashCode("http://example.com/path", "ws2"); got == want {
		t.Fatalf("test bug: the independent hash computation ignores the workspace")
	}

	t.Run("hash codes of canonical equivalents", func(t *testing.T) {
		const workspace = "seed002"
		for _, g := range canonicalGroups {
			t.Run(g.name, func(t *testing.T) {
				want := expectedHashCode(g.canonical, workspace)
				first := strings.TrimSpace(g.variants[0])
				for i, variant := range g.variants {
					r := n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": variant, "workspace": workspace, "strategy": "hash"})
					wantStatus := http.StatusOK
					if i == 0 {
						wantStatus = http.StatusCreated
					}
					if r.status != wantStatus {
						t.Fatalf("variant %q: want %d, got %v", variant, wantStatus, r)
					}
					var l link
					decodeObject(t, r, createFields, &l)
					if l.ShortCode != want {
						t.Errorf("variant %q: code %q, want %q = hash of %q|%s", variant, l.ShortCode, want, g.canonical, workspace)
					}
					if l.Existing != (i > 0) {
						t.Errorf("variant %q: existing = %v, want %v", variant, l.Existing, i > 0)
					}
					// The link keeps the URL it was first created with; the
					// canonical form is only a lookup key.
					if l.OriginalURL != first {
						t.Errorf("variant %q: original_url %q, want the first submission %q", variant, l.OriginalURL, first)
					}
				}
				n.requireRedirect(t, want, first)
			})
		}
	})

	t.Run("hash codes differ per workspace", func(t *testing.T) {
		const target = "https://example.com/shared/page?b=2&a=1"
		const canonical = "https://example.com/shared/page?a=1&b=2"
		codes := map[string]string{}
		for _, ws := range []string{"ws-one", "ws-two"} {
			l := n.createLink(t, map[string]any{"original_url": target, "workspace": ws, "strategy": "hash"})
			if want := expectedHashCode(canonical, ws); l.ShortCode != want {
				t.Errorf("workspace %s: code %q, want %q", ws, l.ShortCode, want)
			}
			codes[ws] = l.ShortCode
		}
		if codes["ws-one"] == codes["ws-two"] {
			t.Errorf("two workspaces got the same hash code %s", codes["ws-one"])
		}
		// Without a workspace the link lives in "default".
		l := n.createLink(t, map[string]any{"original_url": target, "strategy": "hash"})
		if want := expectedHashCode(canonical, "default"); l.ShortCode != want || l.Workspace != "default" {
			t.Errorf("default workspace: code %q workspace %q, want %q default", l.ShortCode, l.Workspace, want)
		}
	})

	t.Run("dedupe with counter codes", func(t *testing.T) {
		const workspace = "dedupe-ws"
		first := n.createLink(t, map[string]any{"original_url": "https://example.com/dedupe?b=2&a=1", "workspace": workspace, "dedupe": true})
		if !counterCodePattern.MatchString(first.ShortCode) {
			t.Errorf("dedupe with the counter strategy gave code %q, want a counter code", first.ShortCode)
		}
		for _, variant := range []string{"https://example.com/dedupe?b=2&a=1", "HTTPS://EXAMPLE.COM:443/dedupe/?a=1&b=2#x"} {
			r := n.postJSON(t, "/api/v1/urls", map[string]any{"original_url": variant, "workspace": workspace, "dedupe": true})
			if r.status != http.StatusOK {
				t.Fatalf("dedupe of %q: want 200, got %v", variant, r)
			}
			var again link
			decodeObject(t, r, append(append([]string{}, createFields...), "existing"), &again)
			if !again.Existing || again.ShortCode != first.ShortCode || again.ID != first.ID {
				t.Errorf("dedupe of %q = %+v, want existing link %s (id %d)", variant, again, first.ShortCode, first.ID)
			}
		}

		other := n.createLink(t, map[string]any{"original_url": "https://example.com/dedupe?b=2&a=1", "workspace": "dedupe-other", "dedupe": true})
		if other.ShortCode == first.ShortCode {
			t.Errorf("dedupe crossed workspaces: code %s reused", other.ShortCode)
		}
		// Without dedupe every create is a new link.
		plain1 := n.createLink(t, map[string]any{"original_url": "https://example.com/dedupe?b=2&a=1", "workspace": workspace})
		plain2 := n.createLink(t, map[string]any{"original_url": "https://example.com/dedupe?b=2&a=1", "workspace": workspace})
		if plain1.ShortCode == first.ShortCode || plain1.ShortCode == plain2.ShortCode {
			t.Errorf("creates without dedupe reused a code: %s, %s, %s", first.ShortCode, plain1.ShortCode, plain2.ShortCode)
		}
	})
}

// TestConcurrentDedupeCreatesOneLink covers 100 identical dedupe creates at
// once: one link, one 201, 99 answers pointing at it.
func TestConcurrentDedupeCreatesOneLink(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	n := startNode(t, nodeOptions{})

	tests := []struct {
		name      string
		workspace string
		extra     map[string]any
	}{
		{"counter with dedupe", "race-counter", map[string]any{"dedupe": true}},
		{"hash strategy", "race-hash", map[string]any{"strategy": "hash"}},
	}
	const target = "https://example.com/stampede?x=1"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const callers = 100
			body := map[string]any{"original_url": target, "workspace": tc.workspace}
			for k, v := range tc.extra {
				body[k] = v
			}
			payload, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			before := n.linkCount(t)

			type result struct {
				status   int
				code     string
				existing bool
				err      string
			}
			results := make([]result, callers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					req, err := http.NewRequest(http.MethodPost, "http://"+n.httpAddr+"/api/v1/urls", bytes.NewReader(payload))
					if err != nil {
						results[i].err = err.Error()
						return
					}
					req.Header.Set("Content-Type", "application/json")
					n.authorize(req, nil)
					resp, err := n.client.Do(req)
					if err != nil {
						results[i].err = err.Error()
						return
					}
					defer resp.Body.Close()
					var l link
					if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
						results[i].err = "decode: " + err.Error()
					}
					results[i].status, results[i].code, results[i].existing = resp.StatusCode, l.ShortCode, l.Existing
				}()
			}
			close(start)
			wg.Wait()

			statuses := map[int]int{}
			codes := map[string]int{}
			withoutExistingFlag := 0
			for i, r := range results {
				if r.err != "" {
					t.Errorf("caller %d: %s", i, r.err)
					continue
				}
				statuses[r.status]++
				codes[r.code]++
				if r.status == http.StatusOK && !r.existing {
					withoutExistingFlag++
				}
				if r.status == http.StatusCreated && r.existing {
					t.Errorf("caller %d: 201 says existing: true", i)
				}
			}
			if statuses[http.StatusCreated] != 1 || statuses[http.StatusOK] != callers-1 {
				t.Errorf("%d identical creates got statuses %v, want one 201 and %d × 200", callers, statuses, callers-1)
			}
			if withoutExistingFlag > 0 {
				t.Errorf("%d of the 200 answers lack \"existing\": true", withoutExistingFlag)
			}
			if len(codes) != 1 {
				t.Errorf("%d identical dedupe creates got %d different codes: %v", callers, len(codes), codes)
			}
			if want := expectedHashCode(target, tc.workspace); tc.extra["strategy"] == "hash" && codes[want] != callers {
				t.Errorf("hash strategy: codes %v, want all %d to be %s", codes, callers, want)
			}
			if after := n.linkCount(t); after != before+1 {
				t.Errorf("link count went from %d to %d, want exactly one new link", before, after)
			}
		})
	}
}
