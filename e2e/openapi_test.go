package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The contract test: docs/openapi.yaml must describe what real nodes
// answer. Every answer below is matched to its operation in the spec and
// validated against it (status, headers, body schema); every operation of
// the spec must have been called at least once.

// contract is the loaded spec and what the test has exercised of it.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	// seen maps "METHOD /path/template" to the statuses answered.
	seen map[string]map[int]bool
}

func loadContract(t *testing.T) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join("..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatalf("load docs/openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("docs/openapi.yaml is not a valid OpenAPI 3.0 document: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("route docs/openapi.yaml: %v", err)
	}
	return &contract{doc: doc, router: router, seen: map[string]map[int]bool{}}
}

// call sends a request to n, requires the status want, and checks the
// answer against the spec.
func (c *contract) call(t *testing.T, n *node, method, path string, header http.Header, body []byte, want int) response {
	t.Helper()
	r := n.request(t, method, path, header, body)
	if r.status != want {
		t.Errorf("%s %s on %s: want %d, got %v", method, path, n.id, want, r)
	}
	c.check(t, n, method, path, header, r)
	return r
}

// check validates one real answer against its operation in the spec.
func (c *contract) check(t *testing.T, n *node, method, path string, header http.Header, r response) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.httpAddr+path, nil)
	if err != nil {
		t.Fatalf("build request %s %s: %v", method, path, err)
	}
	req.Header = header.Clone()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Errorf("%s %s: no operation in docs/openapi.yaml: %v", method, path, err)
		return
	}
	op := method + " " + route.Path
	if c.seen[op] == nil {
		c.seen[op] = map[int]bool{}
	}
	c.seen[op][r.status] = true
	if route.Operation.Responses.Status(r.status) == nil {
		t.Errorf("%s %s: status %d is not declared for %s; answer %v", method, path, r.status, op, r)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: r.status,
		Header: r.header,
		Body:   io.NopCloser(bytes.NewReader(r.body)),
		// Undeclared statuses fail too (checked above with a clearer message).
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: answer does not match %s in docs/openapi.yaml: %v\nanswer: %v", method, path, op, err, r)
	}
}

// checkLines validates each line of a JSON Lines body against a schema of
// the spec (the media type itself is only declared as a byte stream).
func (c *contract) checkLines(t *testing.T, what, schema string, body []byte) int {
	t.Helper()
	ref := c.doc.Components.Schemas[schema]
	if ref == nil || ref.Value == nil {
		t.Fatalf("docs/openapi.yaml has no schema %s", schema)
	}
	lines := 0
	for i, line := range bytes.Split(bytes.TrimRight(body, "\n"), []byte("\n")) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Errorf("%s line %d is not JSON: %v: %s", what, i+1, err, line)
			continue
		}
		if err := ref.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
			t.Errorf("%s line %d does not match %s: %v: %s", what, i+1, schema, err, line)
		}
		lines++
	}
	return lines
}

// requireAllExercised fails for every operation of the spec that the test
// never called, and logs the statuses seen per operation.
func (c *contract) requireAllExercised(t *testing.T) {
	t.Helper()
	var ops []string
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	for _, op := range ops {
		statuses := make([]int, 0, len(c.seen[op]))
		for s := range c.seen[op] {
			statuses = append(statuses, s)
		}
		sort.Ints(statuses)
		if len(statuses) == 0 {
			t.Errorf("operation %s of docs/openapi.yaml was never exercised", op)
			continue
		}
		t.Logf("%-45s %v", op, statuses)
	}
}

// TestOpenAPIContract runs every operation of docs/openapi.yaml against
// real nodes (one, then three joined through the admin API, then a lone
// follower without a leader) and validates every answer against the spec.
func TestOpenAPIContract(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	c := loadContract(t)

	const token = "openapi-contract-token"
	settings := map[string]string{"admin-token": token, "write-timeout": "1s"}
	n1 := startNode(t, nodeOptions{ID: "node1", Settings: settings})

	jsonH := http.Header{"Content-Type": {"application/json"}}
	auth := http.Header{"Authorization": {"Bearer " + token}}
	authJSON := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
	// anonymous sends h without the node's credential.
	anonymous := func(h http.Header) http.Header {
		h = h.Clone()
		h["Authorization"] = nil
		return h
	}
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		h.Set(k, v)
		return h
	}
	create := func(n *node, path string, fields map[string]any, header http.Header, want int) link {
		t.Helper()
		body, err := json.Marshal(fields)
		if err != nil {
			t.Fatalf("marshal %v: %v", fields, err)
		}
		if header == nil {
			header = jsonH
		}
		r := c.call(t, n, http.MethodPost, path, header, body, want)
		var l link
		if want < 300 {
			if err := json.Unmarshal(r.body, &l); err != nil || l.ShortCode == "" {
				t.Fatalf("create answer %v: %v", r, err)
			}
		}
		return l
	}

	// Service endpoints.
	c.call(t, n1, http.MethodGet, "/", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/health", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/health/live", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/metrics", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/ui/", nil, nil, http.StatusOK)

	// Creates, on all three routes, and their refusals.
	keyed := with(jsonH, "Idempotency-Key", "openapi-key-1")
	a := create(n1, "/api/v1/urls", map[string]any{"original_url": "https://example.com/openapi/a"}, keyed, http.StatusCreated)
	if again := create(n1, "/api/v1/urls", map[string]any{"original_url": "https://example.com/openapi/a"}, keyed, http.StatusCreated); again.ShortCode != a.ShortCode {
		t.Errorf("idempotent replay gave %s, want %s", again.ShortCode, a.ShortCode)
	}
	create(n1, "/api/v1/urls", map[string]any{"original_url": "https://example.com/openapi/other"}, keyed, http.StatusUnprocessableEntity)
	d := create(n1, "/api/v1/urls", map[string]any{"url": "https://example.com/openapi/d", "dedupe": true}, nil, http.StatusCreated)
	create(n1, "/api/v1/urls", map[string]any{"url": "https://example.com/openapi/d", "dedupe": true}, nil, http.StatusOK)
	create(n1, "/api/v1/urls", map[string]any{"original_url": "https://example.com/x", "custom_code": "admin"}, nil, http.StatusConflict)
	create(n1, "/api/v1/urls", map[string]any{"original_url": "https://example.com/" + strings.Repeat("x", 2100)}, nil, http.StatusRequestEntityTooLarge)
	c.call(t, n1, http.MethodPost, "/api/v1/urls", jsonH, []byte("{"), http.StatusBadRequest)
	c.call(t, n1, http.MethodPost, "/api/v1/urls", http.Header{"Content-Type": {"text/plain"}}, []byte("https://example.com/"), http.StatusUnsupportedMediaType)
	e := create(n1, "/api/v1/urls", map[string]any{"original_url": "https://example.com/openapi/expiring", "expires_in_seconds": 1}, nil, http.StatusCreated)

	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	formBody := []byte(url.Values{"original_url": {"https://example.com/openapi/form"}, "custom_code": {"openapi-form"}}.Encode())
	c.call(t, n1, http.MethodPost, "/shorten", form, formBody, http.StatusCreated)
	c.call(t, n1, http.MethodPost, "/shorten", form, formBody, http.StatusConflict)
	ws := create(n1, "/api/v1/workspaces/team-a/links", map[string]any{"original_url": "https://example.com/openapi/ws"}, nil, http.StatusCreated)
	if ws.Workspace != "team-a" {
		t.Errorf("workspace create: workspace %q, want team-a", ws.Workspace)
	}
	create(n1, "/api/v1/workspaces/bad.ws/links", map[string]any{"original_url": "https://example.com/openapi/ws"}, nil, http.StatusBadRequest)

	// Reads, lists, QR codes, redirects.
	page := c.call(t, n1, http.MethodGet, "/api/v1/urls?limit=1", nil, nil, http.StatusOK)
	var list struct {
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal(page.body, &list); err != nil || list.NextCursor == nil {
		t.Fatalf("list with limit=1 of several links: want a next_cursor, got %v (%v)", page, err)
	}
	c.call(t, n1, http.MethodGet, "/api/v1/urls?limit=1000&cursor="+*list.NextCursor, nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/urls?limit=0", nil, nil, http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode, nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/nosuchcode", nil, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode+"/qr?size=128", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode+"/qr?size=1", nil, nil, http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/nosuchcode/qr", nil, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/"+a.ShortCode, nil, nil, http.StatusFound)
	c.call(t, n1, http.MethodHead, "/"+a.ShortCode, nil, nil, http.StatusFound)
	c.call(t, n1, http.MethodGet, "/nosuchcode", nil, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/nosuchcode", http.Header{"Accept": {"text/html"}}, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodHead, "/nosuchcode", nil, nil, http.StatusNotFound)

	// Stats, once the click has been flushed, so last_accessed_at is set.
	if got := n1.waitClicks(t, a.ShortCode, 1); got < 1 {
		t.Fatalf("the redirect's click did not reach stats within %v", clickWaitTimeout)
	}
	stats := "/api/v1/urls/" + a.ShortCode + "/stats"
	c.call(t, n1, http.MethodGet, stats, nil, nil, http.StatusOK)
	now := time.Now().UTC()
	span := "?interval=day&from=" + now.Add(-72*time.Hour).Format(time.RFC3339) + "&to=" + now.Format(time.RFC3339)
	c.call(t, n1, http.MethodGet, stats+span, nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, stats+"?interval=week", nil, nil, http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/nosuchcode/stats", nil, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/stats/"+a.ShortCode+span, nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/stats/"+a.ShortCode+"?from=yesterday", nil, nil, http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/stats/nosuchcode", nil, nil, http.StatusNotFound)

	// The expired link: 410 from every read of one code.
	if !eventually(5*time.Second, func() bool {
		r, err := n1.tryRequest(t, http.MethodGet, "/api/v1/urls/"+e.ShortCode, nil, nil)
		return err == nil && r.status == http.StatusGone
	}) {
		t.Fatalf("link %s with expires_in_seconds 1 did not expire within 5 s", e.ShortCode)
	}
	for _, p := range []string{"/api/v1/urls/", "/stats/", "/"} {
		c.call(t, n1, http.MethodGet, p+e.ShortCode, nil, nil, http.StatusGone)
	}
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+e.ShortCode+"/stats", nil, nil, http.StatusGone)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+e.ShortCode+"/qr", nil, nil, http.StatusGone)
	c.call(t, n1, http.MethodHead, "/"+e.ShortCode, nil, nil, http.StatusGone)

	c.call(t, n1, http.MethodDelete, "/api/v1/urls/"+d.ShortCode, nil, nil, http.StatusNoContent)
	c.call(t, n1, http.MethodDelete, "/api/v1/urls/"+d.ShortCode, nil, nil, http.StatusNotFound)

	// Admin calls on the single node, with and without the token.
	c.call(t, n1, http.MethodGet, "/admin/cluster", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/admin/cluster", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodPost, "/admin/leadership-transfer", auth, nil, http.StatusConflict)
	c.call(t, n1, http.MethodPost, "/admin/leadership-transfer", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodPost, "/admin/leave", authJSON, []byte(`{"id":"node1"}`), http.StatusConflict)
	c.call(t, n1, http.MethodPost, "/admin/leave", authJSON, []byte(`{"id":"ghost"}`), http.StatusNotFound)
	c.call(t, n1, http.MethodPost, "/admin/leave", authJSON, []byte(`not json`), http.StatusBadRequest)
	c.call(t, n1, http.MethodPost, "/admin/join", authJSON, []byte(`not json`), http.StatusBadRequest)
	c.call(t, n1, http.MethodPost, "/admin/join", authJSON, []byte(`{"id":"node9"}`), http.StatusBadRequest)
	c.call(t, n1, http.MethodPost, "/admin/join", anonymous(jsonH), []byte(`{"id":"node9"}`), http.StatusUnauthorized)
	c.call(t, n1, http.MethodPost, "/admin/promote", authJSON, []byte(`{"id":"node1"}`), http.StatusConflict) // a voter already
	c.call(t, n1, http.MethodPost, "/admin/promote", authJSON, []byte(`{"id":"ghost"}`), http.StatusNotFound)
	c.call(t, n1, http.MethodPost, "/admin/promote", authJSON, []byte(`not json`), http.StatusBadRequest)
	c.call(t, n1, http.MethodPost, "/admin/promote", anonymous(jsonH), []byte(`{"id":"node1"}`), http.StatusUnauthorized)

	backup := c.call(t, n1, http.MethodGet, "/admin/backup", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/admin/backup", noCredential(), nil, http.StatusUnauthorized)
	octets := with(auth, "Content-Type", "application/octet-stream")
	c.call(t, n1, http.MethodPost, "/admin/restore", octets, backup.body, http.StatusOK)
	c.call(t, n1, http.MethodPost, "/admin/restore", octets, []byte("not a backup"), http.StatusBadRequest)
	c.call(t, n1, http.MethodPost, "/admin/restore", octets, []byte{}, http.StatusBadRequest)
	c.call(t, n1, http.MethodPost, "/admin/restore", anonymous(http.Header{"Content-Type": {"application/octet-stream"}}), backup.body, http.StatusUnauthorized)

	export := c.call(t, n1, http.MethodGet, "/admin/export", auth, nil, http.StatusOK)
	if lines := c.checkLines(t, "export", "LinkRead", export.body); lines < 3 {
		t.Errorf("export has %d lines, want at least 3: %v", lines, export)
	}
	c.call(t, n1, http.MethodGet, "/admin/export", noCredential(), nil, http.StatusUnauthorized)
	first, _, _ := bytes.Cut(export.body, []byte("\n"))
	imp := bytes.Join([][]byte{
		first, // skipped: the same code with the same URL
		[]byte(`{"short_code":"openapi-imported","original_url":"https://example.com/openapi/imported"}`),
		[]byte(`not json`),
	}, []byte("\n"))
	ndjson := with(auth, "Content-Type", "application/x-ndjson")
	r := c.call(t, n1, http.MethodPost, "/admin/import", ndjson, imp, http.StatusOK)
	if !bytes.Contains(r.body, []byte(`"created":1,"skipped":1`)) {
		t.Errorf("import report: want 1 created and 1 skipped, got %v", r)
	}
	c.call(t, n1, http.MethodPost, "/admin/import", anonymous(http.Header{"Content-Type": {"application/x-ndjson"}}), imp, http.StatusUnauthorized)

	// Runtime profiles (short ones only: a CPU profile or trace takes seconds).
	c.call(t, n1, http.MethodGet, "/debug/pprof/", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/debug/pprof/", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/debug/pprof/heap", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/debug/pprof/goroutine?debug=1", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/debug/pprof/cmdline", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/debug/pprof/no-such-profile", auth, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/debug/pprof/heap", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/debug/pprof/symbol", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/debug/pprof/symbol", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodPost, "/debug/pprof/symbol", with(auth, "Content-Type", "text/plain"), []byte("0x1"), http.StatusOK)
	c.call(t, n1, http.MethodPost, "/debug/pprof/symbol", anonymous(http.Header{"Content-Type": {"text/plain"}}), []byte("0x1"), http.StatusUnauthorized)

	// API keys and the audit log.
	kr := c.call(t, n1, http.MethodPost, "/admin/keys", authJSON,
		[]byte(`{"name":"reader","scopes":["links:read"],"workspaces":["team-a"]}`), http.StatusCreated)
	var reader struct{ ID, Key string }
	if err := json.Unmarshal(kr.body, &reader); err != nil || reader.Key == "" {
		t.Fatalf("key answer %v: %v", kr, err)
	}
	c.call(t, n1, http.MethodPost, "/admin/keys", authJSON, []byte(`{"scopes":["links:fly"],"workspaces":["*"]}`), http.StatusBadRequest)
	c.call(t, n1, http.MethodPost, "/admin/keys", anonymous(jsonH), []byte(`{"scopes":["admin"],"workspaces":["*"]}`), http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/admin/keys", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/admin/keys", noCredential(), nil, http.StatusUnauthorized)
	asReader := http.Header{"Authorization": {"Bearer " + reader.Key}}
	c.call(t, n1, http.MethodGet, "/admin/keys", asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/api/v1/urls?workspace=team-a", asReader, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/urls", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode, asReader, nil, http.StatusNotFound) // workspace default: not the key's
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode, noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode+"/stats", asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode+"/stats", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/stats/"+a.ShortCode, asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/stats/"+a.ShortCode, noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodDelete, "/api/v1/urls/"+a.ShortCode, asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodDelete, "/api/v1/urls/"+a.ShortCode, noCredential(), nil, http.StatusUnauthorized)
	create(n1, "/api/v1/urls", map[string]any{"url": "https://example.com/openapi/denied"}, with(asReader, "Content-Type", "application/json"), http.StatusForbidden)
	create(n1, "/api/v1/urls", map[string]any{"url": "https://example.com/openapi/denied"}, anonymous(jsonH), http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/admin/audit?limit=5", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/admin/audit?limit=0", auth, nil, http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/admin/audit", asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/admin/audit", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodDelete, "/admin/keys/"+reader.ID, asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodDelete, "/admin/keys/"+reader.ID, noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodDelete, "/admin/keys/"+reader.ID, auth, nil, http.StatusNoContent)
	c.call(t, n1, http.MethodDelete, "/admin/keys/"+reader.ID, auth, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/api/v1/urls", asReader, nil, http.StatusUnauthorized)

	// Membership: two more nodes joined through the admin API. node2
	// limits creates to one per second, so its second create is a 429.
	limited := map[string]string{"admin-token": token, "write-timeout": "1s", "create-rate": "1", "create-burst": "1"}
	n2 := startWaitingNode(t, "node2", limited)
	c.call(t, n2, http.MethodGet, "/health", nil, nil, http.StatusServiceUnavailable) // not a member yet
	c.call(t, n1, http.MethodPost, "/admin/join", authJSON,
		[]byte(`{"id":"node2","raft_addr":"`+n2.raftAddr+`","http_addr":"`+n2.httpAddr+`"}`), http.StatusOK)
	c.call(t, n1, http.MethodPost, "/admin/join", authJSON,
		[]byte(`{"id":"node2","raft_addr":"127.0.0.1:1","http_addr":"`+n2.httpAddr+`"}`), http.StatusConflict)
	n3 := startWaitingNode(t, "node3", settings)
	// node3 joins as a read replica, then is promoted to a voter.
	c.call(t, n1, http.MethodPost, "/admin/join", authJSON,
		[]byte(`{"id":"node3","raft_addr":"`+n3.raftAddr+`","http_addr":"`+n3.httpAddr+`","non_voter":true}`), http.StatusOK)
	c.call(t, n1, http.MethodPost, "/admin/promote", authJSON, []byte(`{"id":"node3"}`), http.StatusOK)
	nodes := []*node{n1, n2, n3}
	for _, n := range nodes {
		if err := n.waitReady(leaderKnown); err != nil {
			t.Fatalf("node %s after joining: %v", n.id, err)
		}
	}

	limitedSeen := false
	for i := 0; i < 5 && !limitedSeen; i++ {
		body := []byte(`{"original_url":"https://example.com/openapi/limited/` + itoa(i) + `"}`)
		r := n2.request(t, http.MethodPost, "/api/v1/urls", jsonH, body)
		c.check(t, n2, http.MethodPost, "/api/v1/urls", jsonH, r)
		switch r.status {
		case http.StatusTooManyRequests:
			limitedSeen = true
		case http.StatusCreated:
		default:
			t.Errorf("create on the rate-limited node: want 201 or 429, got %v", r)
		}
	}
	if !limitedSeen {
		t.Errorf("5 quick creates with --create-rate 1 --create-burst 1: none was answered 429")
	}

	c.call(t, n1, http.MethodPost, "/admin/leadership-transfer", auth, nil, http.StatusOK)
	leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
	// Through a follower, forwarded to the leader: every server answered,
	// so each has applied_index and replication_lag.
	c.call(t, followers[0], http.MethodGet, "/admin/cluster", auth, nil, http.StatusOK)

	// The follower to remove is stopped first: a live one is still a
	// gossip member, which the leader would add back.
	gone, survivor := followers[1], followers[0]
	gone.kill()
	c.call(t, survivor, http.MethodPost, "/admin/leave", authJSON, []byte(`{"id":"`+gone.id+`"}`), http.StatusOK)
	if !eventually(membershipWait, func() bool {
		r, err := survivor.tryRequest(t, http.MethodGet, "/admin/cluster", auth, nil)
		var view clusterView
		return err == nil && r.status == http.StatusOK && json.Unmarshal(r.body, &view) == nil &&
			strings.Join(view.ids(), ",") == strings.Join(nodeIDs(leader, survivor), ",")
	}) {
		t.Fatalf("/admin/cluster does not list exactly %v within %v", nodeIDs(leader, survivor), membershipWait)
	}

	// Without its leader, the last follower of a two-voter cluster cannot
	// write: writes are 503 after --write-timeout. (Admin calls would wait
	// for a leader far longer, up to a minute for the stale cluster view.)
	leader.kill9()
	if !eventually(10*time.Second, func() bool {
		h, err := survivor.tryLive() // /health is 503 without a leader
		return err == nil && h.Leader == ""
	}) {
		t.Fatalf("node %s still names a leader 10 s after the leader was killed", survivor.id)
	}
	create(survivor, "/api/v1/urls", map[string]any{"original_url": "https://example.com/openapi/no-leader"}, nil, http.StatusServiceUnavailable)
	c.call(t, survivor, http.MethodDelete, "/api/v1/urls/"+a.ShortCode, nil, nil, http.StatusServiceUnavailable)

	c.requireAllExercised(t)
}
