package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// relayAnswer is one create answer as a client sees it.
type relayAnswer struct {
	status int
	keys   []string // the JSON object's keys, sorted
	link   link
	detail string // of a problem answer
	body   string
}

// postCreate sends one create to n (with an Idempotency-Key when key is
// set) without a *testing.T, so that workers can call it.
func postCreate(n *node, fields map[string]any, key string) (relayAnswer, error) {
	body, _ := json.Marshal(fields)
	req, err := http.NewRequest(http.MethodPost, "http://"+n.httpAddr+"/api/v1/urls", strings.NewReader(string(body)))
	if err != nil {
		return relayAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	n.authorize(req, nil)
	resp, err := n.client.Do(req)
	if err != nil {
		return relayAnswer{}, err
	}
	defer resp.Body.Close()
	var raw map[string]json.RawMessage
	a := relayAnswer{status: resp.StatusCode}
	dec := json.NewDecoder(resp.Body)
	var whole json.RawMessage
	if err := dec.Decode(&whole); err != nil {
		return a, fmt.Errorf("answer %d is not JSON: %w", resp.StatusCode, err)
	}
	a.body = string(whole)
	if err := json.Unmarshal(whole, &raw); err != nil {
		return a, fmt.Errorf("answer %d is not a JSON object: %s", resp.StatusCode, whole)
	}
	for k := range raw {
		a.keys = append(a.keys, k)
	}
	sort.Strings(a.keys)
	if resp.StatusCode < 300 {
		err = json.Unmarshal(whole, &a.link)
	} else {
		var p problem
		err = json.Unmarshal(whole, &p)
		a.detail = p.Detail
	}
	return a, err
}

// TestConcurrentCreatesThroughAFollower: creates of every kind sent at once
// through a follower — which relays them to the leader in shared requests
// — get the answers the leader itself would give, each with its own
// idempotency key and outcome, and every acknowledged code redirects on
// every node as soon as its answer arrived.
func TestConcurrentCreatesThroughAFollower(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	leader, followers := waitOneLeader(t, formationBound, nodes...)
	via := followers[0]
	leader.createLink(t, map[string]any{"original_url": "https://example.com/relay/taken", "custom_code": "relay-taken"})
	fromLeader, err := postCreate(leader, map[string]any{"original_url": "https://example.com/relay/shape"}, "")
	if err != nil || fromLeader.status != http.StatusCreated {
		t.Fatalf("create on the leader: %v %+v", err, fromLeader)
	}

	const shared = "https://example.com/relay/shared?b=2&a=1"
	var (
		mu       sync.Mutex
		failures []string
		deduped  []relayAnswer
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	// acknowledged checks a 2xx answer's shape and that every node
	// redirects its code right away.
	acknowledged := func(what string, a relayAnswer, target string) {
		want := fromLeader.keys
		if a.status == http.StatusOK {
			want = append(slices.Clone(want), "existing")
			sort.Strings(want)
		}
		if !slices.Equal(a.keys, want) {
			fail("%s: fields %v, the leader answers %v", what, a.keys, want)
		}
		if a.link.ShortURL != "http://"+via.httpAddr+"/"+a.link.ShortCode || a.link.OriginalURL != target || a.link.ID <= 0 {
			fail("%s: %s", what, a.body)
		}
		for _, n := range nodes {
			status, loc, err := plainRequest(n.client, http.MethodHead, "http://"+n.httpAddr+"/"+a.link.ShortCode, nil)
			if err != nil || status != http.StatusFound || loc != target {
				fail("%s: HEAD /%s on %s right after the answer: %d %q %v", what, a.link.ShortCode, n.id, status, loc, err)
			}
		}
	}
	// expect sends one create and checks its status (and problem detail).
	expect := func(what string, fields map[string]any, key string, status int, detail string) relayAnswer {
		a, err := postCreate(via, fields, key)
		switch {
		case err != nil:
			fail("%s: %v", what, err)
		case a.status != status:
			fail("%s: %d %s, want %d", what, a.status, a.body, status)
		case detail != "" && a.detail != detail:
			fail("%s: detail %q, want %q", what, a.detail, detail)
		case status < 300:
			target, _ := fields["original_url"].(string)
			acknowledged(what, a, target)
		}
		return a
	}

	const workers, rounds = 8, 4
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				id := fmt.Sprintf("%d-%d", w, r)
				plain := expect("plain "+id, map[string]any{"original_url": "https://example.com/relay/" + id}, "", http.StatusCreated, "")
				if !counterCodePattern.MatchString(plain.link.ShortCode) || plain.link.ExpiresAt != nil {
					fail("plain %s: %s", id, plain.body)
				}

				code := "relay-" + id
				custom := expect("custom "+id, map[string]any{"original_url": "https://example.com/c/" + id, "custom_code": code, "expires_in_hours": 2}, "", http.StatusCreated, "")
				if custom.link.ShortCode != code || custom.link.ExpiresAt == nil {
					fail("custom %s: %s", id, custom.body)
				} else if at, err := time.Parse(time.RFC3339, *custom.link.ExpiresAt); err != nil || time.Until(at) < 110*time.Minute || time.Until(at) > 2*time.Hour {
					fail("custom %s: expires_at %s, want two hours from now", id, *custom.link.ExpiresAt)
				}

				a, err := postCreate(via, map[string]any{"original_url": shared, "dedupe": true}, "")
				if err != nil || a.status != http.StatusCreated && a.status != http.StatusOK {
					fail("dedupe %s: %v %d %s", id, err, a.status, a.body)
				} else {
					acknowledged("dedupe "+id, a, shared)
					mu.Lock()
					deduped = append(deduped, a)
					mu.Unlock()
				}

				key := "relay-key-" + id
				fields := map[string]any{"original_url": "https://example.com/k/" + id}
				first := expect("keyed "+id, fields, key, http.StatusCreated, "")
				again := expect("keyed replay "+id, fields, key, http.StatusCreated, "")
				if first.body != again.body {
					fail("replay of key %s: %s, first answer %s", key, again.body, first.body)
				}
				expect("key reused "+id, map[string]any{"original_url": "https://example.com/other/" + id}, key,
					http.StatusUnprocessableEntity, "Idempotency-Key was already used for a different request")

				expect("taken "+id, map[string]any{"original_url": "https://example.com/t/" + id, "custom_code": "relay-taken"}, "",
					http.StatusConflict, "custom_code relay-taken is already taken")
				expect("reserved "+id, map[string]any{"original_url": "https://example.com/r/" + id, "custom_code": "Health"}, "",
					http.StatusConflict, "custom_code Health is a reserved word")
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d wrong answers through follower %s, first ones:\n%s", len(failures), via.id, strings.Join(failures[:min(10, len(failures))], "\n"))
	}
	created := 0
	for _, a := range deduped {
		if a.link.ShortCode != deduped[0].link.ShortCode {
			t.Fatalf("dedupe creates of one URL got codes %s and %s", deduped[0].link.ShortCode, a.link.ShortCode)
		}
		if a.status == http.StatusCreated {
			created++
		} else if !a.link.Existing {
			t.Fatalf("a 200 dedupe answer without existing: %s", a.body)
		}
	}
	if created != 1 {
		t.Fatalf("%d dedupe creates of one URL answered 201, want exactly one (the rest 200 existing)", created)
	}
}
