package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
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
// answer and accept. Every answer below is matched to its operation in the
// spec and validated against it (status, headers, body schema); every
// request a node accepted (a call expecting a status below 400) is
// validated against the same operation (parameters, JSON and form bodies,
// security); every operation of the spec must have been called at least
// once.

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
// answer against the spec; when want is below 400, the request too.
func (c *contract) call(t *testing.T, n *node, method, path string, header http.Header, body []byte, want int) response {
	t.Helper()
	r := n.request(t, method, path, header, body)
	if r.status != want {
		t.Errorf("%s %s on %s: want %d, got %v", method, path, n.id, want, r)
	}
	c.check(t, n, method, path, header, r)
	if want < 400 && r.status == want {
		c.checkRequest(t, n, method, path, header, body)
	}
	return r
}

// checkRequest validates a request a node accepted against its operation
// in the spec: path, query and header parameters, a JSON or form body, and
// that it carries a credential one of the operation's security
// alternatives names (sent as n.request sends it).
func (c *contract) checkRequest(t *testing.T, n *node, method, path string, header http.Header, body []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.httpAddr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("build request %s %s: %v", method, path, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	n.authorize(req, header)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return // check reports it
	}
	opts := &openapi3filter.Options{AuthenticationFunc: credentialPresent, MultiError: true}
	switch mt, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mt {
	case "", "application/json", "application/x-www-form-urlencoded":
	default: // backups, JSON Lines, pprof's text: the spec says only "bytes"
		opts.ExcludeRequestBody = true
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		t.Errorf("%s %s: the request %s accepted does not match %s %s in docs/openapi.yaml: %v\nbody: %s",
			method, path, n.id, method, route.Path, err, body)
	}
}

// credentialPresent holds a request to a security scheme of the spec: it
// must carry the credential where the scheme says. Whether the credential
// is valid is the node's to judge.
func credentialPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	h := in.RequestValidationInput.Request.Header
	switch in.SecuritySchemeName {
	case "bearer":
		if a := h.Get("Authorization"); len(a) > len("Bearer ") && strings.EqualFold(a[:len("Bearer ")], "Bearer ") {
			return nil
		}
	case "apiKeyHeader":
		if h.Get("X-Api-Key") != "" {
			return nil
		}
	}
	return fmt.Errorf("no credential for security scheme %s", in.SecuritySchemeName)
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
	settings := map[string]string{"admin-token": token, "write-timeout": "1s", "cluster-key": newClusterKey(t)}
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
	c.call(t, n1, http.MethodGet, "/health/writes", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/health", noCredential(), nil, http.StatusOK) // a probe's: no cluster id
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
	if r := c.call(t, n1, http.MethodGet, "/api/v1/urls?offset=1&limit=1&count=true", nil, nil, http.StatusOK); !strings.Contains(string(r.body), `"total":`) {
		t.Errorf("list with count=true: no total in %v", r)
	}
	c.call(t, n1, http.MethodGet, "/api/v1/urls?offset=1&cursor="+*list.NextCursor, nil, nil, http.StatusBadRequest)
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
	c.call(t, n1, http.MethodGet, stats+"?group_by=country", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/stats/"+a.ShortCode+"?group_by=referrer", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, stats+"?group_by=device&format=csv", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, stats+"?group_by=ip", nil, nil, http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/api/v1/stats?workspace=default&group_by=browser", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/stats", nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/stats?format=csv", nil, nil, http.StatusOK)
	rows := "/api/v1/urls/" + a.ShortCode + "/visits"
	c.call(t, n1, http.MethodGet, rows, nil, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, rows+"?limit=0", nil, nil, http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/nosuchcode/visits", nil, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/api/v1/visits?workspace=default&exclude_bots=true", nil, nil, http.StatusOK)
	waitRaised(t, n1, 9) // deleting visits came with LevelVisitRows
	forgotten := create(n1, "/api/v1/urls", map[string]any{"url": "https://example.com/forgotten"}, nil, http.StatusCreated)
	c.call(t, n1, http.MethodDelete, "/api/v1/urls/"+forgotten.ShortCode+"/visits", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodDelete, "/api/v1/urls/nosuchcode/visits", auth, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/nosuchcode", nil, nil, http.StatusNotFound) // an orphan visit
	c.call(t, n1, http.MethodGet, "/api/v1/visits/orphan?type=regular_404", auth, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/visits/orphan?type=nosuchtype", auth, nil, http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/api/v1/visits/orphan", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodDelete, "/api/v1/visits/orphan", auth, nil, http.StatusOK)

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

	// Links people manage: options, domains, edits, tags, bulk creates,
	// guarded redirects.
	fx := exerciseManagedLinks(t, c, n1, a, e)

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
		// Options, domains, creation times and clicks are imported; a
		// protected line without its password is refused, never imported
		// open.
		[]byte(`{"short_code":"openapi-imported-opts","original_url":"https://example.com/openapi/imported-opts","domain":"` + openapiDomain + `","title":"Imported","tags":["imported"],"max_visits":3,"created_at":"2021-03-04T05:06:07Z","click_count":2}`),
		[]byte(`{"short_code":"openapi-imported-pw","original_url":"https://example.com/openapi/imported-pw","password_protected":true}`),
	}, []byte("\n"))
	ndjson := with(auth, "Content-Type", "application/x-ndjson")
	r := c.call(t, n1, http.MethodPost, "/admin/import", ndjson, imp, http.StatusOK)
	var report struct {
		Created, Skipped int
		Failed           []struct {
			Line  int
			Error string
		}
	}
	if err := json.Unmarshal(r.body, &report); err != nil || report.Created != 2 || report.Skipped != 1 || len(report.Failed) != 2 ||
		report.Failed[1].Line != 5 || !strings.Contains(report.Failed[1].Error, "password") {
		t.Errorf("import report: want 2 created, 1 skipped, lines 3 and 5 failed (5 for its password), got %v (%v)", r, err)
	}
	if r := c.call(t, n1, http.MethodGet, "/api/v1/urls/openapi-imported-opts?domain="+openapiDomain, nil, nil, http.StatusOK); !bytes.Contains(r.body, []byte(`"title":"Imported","tags":["imported"],"max_visits":3,`)) || !bytes.Contains(r.body, []byte(`"created_at":"2021-03-04T05:06:07.000Z",`)) || !bytes.Contains(r.body, []byte(`"click_count":2,`)) {
		t.Errorf("imported link lost its options, creation time or clicks: %v", r)
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

	// What people manage, with keys that lack the scope or the workspace.
	keyOf := func(body string) http.Header {
		t.Helper()
		r := c.call(t, n1, http.MethodPost, "/admin/keys", authJSON, []byte(body), http.StatusCreated)
		var k struct{ Key string }
		if err := json.Unmarshal(r.body, &k); err != nil || k.Key == "" {
			t.Fatalf("key answer %v: %v", r, err)
		}
		return http.Header{"Authorization": {"Bearer " + k.Key}}
	}
	asWriter := keyOf(`{"name":"team-a writer","scopes":["links:write"],"workspaces":["team-a"]}`)
	asStats := keyOf(`{"name":"stats only","scopes":["stats:read"],"workspaces":["*"]}`)
	asDomain := keyOf(`{"name":"short.example only","scopes":["links:read","links:write"],"workspaces":["*"],"domains":["Short.Example"]}`)
	domainJSON := with(asDomain, "Content-Type", "application/json")
	c.call(t, n1, http.MethodPost, "/admin/keys", authJSON, []byte(`{"scopes":["admin"],"workspaces":["*"],"domains":["short.example"]}`), http.StatusBadRequest)
	c.call(t, n1, http.MethodGet, "/admin/keys", auth, nil, http.StatusOK) // lists keys with domains
	// A key limited to a domain works there only; links elsewhere look absent.
	c.call(t, n1, http.MethodPost, "/api/v1/urls", domainJSON, []byte(`{"url":"https://example.com/openapi/limited-key/default"}`), http.StatusForbidden)
	c.call(t, n1, http.MethodPost, "/api/v1/urls", domainJSON, []byte(`{"url":"https://example.com/openapi/limited-key/in","domain":"`+openapiDomain+`"}`), http.StatusCreated)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode, asDomain, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodPatch, "/api/v1/urls/"+a.ShortCode, domainJSON, []byte(`{"title":"not mine"}`), http.StatusNotFound)
	c.call(t, n1, http.MethodDelete, "/api/v1/urls/"+a.ShortCode, asDomain, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodPatch, "/api/v1/urls/"+fx.domainCode+"?domain="+openapiDomain, domainJSON, []byte(`{"tags":["domain","limited-key"]}`), http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+fx.domainCode+"/history?domain="+openapiDomain, asDomain, nil, http.StatusOK)
	r = c.call(t, n1, http.MethodGet, "/api/v1/urls?limit=1000", asDomain, nil, http.StatusOK)
	var scoped struct{ Links []managedLink }
	if err := json.Unmarshal(r.body, &scoped); err != nil || len(scoped.Links) == 0 {
		t.Errorf("list with a key limited to %s: %v (%v)", openapiDomain, r, err)
	}
	for _, l := range scoped.Links {
		if l.Domain != openapiDomain {
			t.Errorf("a key limited to %s lists %s of domain %q", openapiDomain, l.ShortCode, l.Domain)
		}
	}
	if r := c.call(t, n1, http.MethodGet, "/api/v1/tags", asDomain, nil, http.StatusOK); bytes.Contains(r.body, []byte(`"openapi"`)) {
		t.Errorf("a key limited to %s sees the tags of default-domain links: %s", openapiDomain, r.body)
	}
	r = c.call(t, n1, http.MethodPost, "/api/v1/urls/bulk", domainJSON, []byte(`{"links":[`+
		`{"original_url":"https://example.com/openapi/limited-key/bulk-in","domain":"`+openapiDomain+`"},`+
		`{"original_url":"https://example.com/openapi/limited-key/bulk-out"}]}`), http.StatusOK)
	requireBulk(t, r, http.StatusCreated, http.StatusForbidden)
	readerJSON, writerJSON := with(asReader, "Content-Type", "application/json"), with(asWriter, "Content-Type", "application/json")
	c.call(t, n1, http.MethodPatch, "/api/v1/urls/"+ws.ShortCode, writerJSON, []byte(`{"title":"Team A"}`), http.StatusOK)
	c.call(t, n1, http.MethodPatch, "/api/v1/urls/"+a.ShortCode, writerJSON, []byte(`{"title":"not team A"}`), http.StatusNotFound)
	c.call(t, n1, http.MethodPatch, "/api/v1/urls/"+ws.ShortCode, readerJSON, []byte(`{"title":"x"}`), http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+ws.ShortCode+"/history", asReader, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode+"/history", asReader, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/"+a.ShortCode+"/history", asStats, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/api/v1/tags?workspace=team-a", asReader, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/tags", asStats, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/api/v1/key", asReader, nil, http.StatusOK)
	c.call(t, n1, http.MethodGet, "/api/v1/key", nil, nil, http.StatusOK) // the admin token
	c.call(t, n1, http.MethodGet, "/api/v1/key", noCredential(), nil, http.StatusUnauthorized)
	// Public stats asked for with a credential are judged by it.
	c.call(t, n1, http.MethodGet, "/api/v1/urls/openapi-full/stats", asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/api/v1/urls/openapi-full/stats", asStats, nil, http.StatusOK)
	r = c.call(t, n1, http.MethodPost, "/api/v1/urls/bulk", writerJSON, []byte(`{"links":[`+
		`{"original_url":"https://example.com/openapi/team-a/bulk"},`+
		`{"original_url":"https://example.com/openapi/team-b/bulk","workspace":"team-b"}]}`), http.StatusOK)
	requireBulk(t, r, http.StatusCreated, http.StatusForbidden)
	c.call(t, n1, http.MethodPost, "/api/v1/urls/bulk", readerJSON, []byte(`{"links":[{"url":"https://example.com/"}]}`), http.StatusForbidden)
	c.call(t, n1, http.MethodPost, "/admin/domains", readerJSON, []byte(`{"domain":"x.example"}`), http.StatusForbidden)
	c.call(t, n1, http.MethodPost, "/admin/domains", anonymous(jsonH), []byte(`{"domain":"x.example"}`), http.StatusUnauthorized)
	c.call(t, n1, http.MethodGet, "/admin/domains", asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodGet, "/admin/domains", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodDelete, "/admin/domains/"+openapiDomain, asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodDelete, "/admin/domains/"+openapiDomain, noCredential(), nil, http.StatusUnauthorized)
	// Webhooks: registered, listed (never with their secret), removed.
	const hookSecret = "openapi-webhook-secret"
	r = c.call(t, n1, http.MethodPost, "/admin/webhooks", jsonH, []byte(`{"url":"https://hooks.example.com/linkraft","events":["link.created","link.clicked"],"secret":"`+hookSecret+`"}`), http.StatusCreated)
	var hook struct{ ID string }
	decodeAnswer(t, r, &hook)
	if r := c.call(t, n1, http.MethodPost, "/admin/webhooks", jsonH, []byte(`{"url":"https://hooks.example.com/","events":["link.exploded"],"secret":"`+hookSecret+`"}`), http.StatusBadRequest); !strings.Contains(problemDetail(r), "events") {
		t.Errorf("unknown webhook event: detail %q does not name the field", problemDetail(r))
	}
	c.call(t, n1, http.MethodPost, "/admin/webhooks", readerJSON, []byte(`{}`), http.StatusForbidden)
	c.call(t, n1, http.MethodPost, "/admin/webhooks", anonymous(jsonH), []byte(`{}`), http.StatusUnauthorized)
	if r := c.call(t, n1, http.MethodGet, "/admin/webhooks", nil, nil, http.StatusOK); bytes.Contains(r.body, []byte(hookSecret)) || !bytes.Contains(r.body, []byte(hook.ID)) {
		t.Errorf("webhook list shows the secret or misses the webhook: %s", r.body)
	}
	c.call(t, n1, http.MethodGet, "/admin/webhooks", asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodDelete, "/admin/webhooks/"+hook.ID, noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodDelete, "/admin/webhooks/"+hook.ID, nil, nil, http.StatusNoContent)
	c.call(t, n1, http.MethodDelete, "/admin/webhooks/"+hook.ID, nil, nil, http.StatusNotFound)
	// The audit log now holds edits and domain changes too.
	r = c.call(t, n1, http.MethodGet, "/admin/audit?limit=1000", auth, nil, http.StatusOK)
	for _, action := range []string{"link.edit", "domain.set", "domain.remove"} {
		if !bytes.Contains(r.body, []byte(`"action":"`+action+`"`)) {
			t.Errorf("audit log has no %s entry: %s", action, r.body)
		}
	}

	c.call(t, n1, http.MethodDelete, "/admin/keys/"+reader.ID, asReader, nil, http.StatusForbidden)
	c.call(t, n1, http.MethodDelete, "/admin/keys/"+reader.ID, noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n1, http.MethodDelete, "/admin/keys/"+reader.ID, auth, nil, http.StatusNoContent)
	c.call(t, n1, http.MethodDelete, "/admin/keys/"+reader.ID, auth, nil, http.StatusNotFound)
	c.call(t, n1, http.MethodGet, "/api/v1/urls", asReader, nil, http.StatusUnauthorized)

	// Membership: two more nodes joined through the admin API. node2
	// limits creates to one per second, so its second create is a 429.
	limited := map[string]string{"admin-token": token, "write-timeout": "1s", "create-rate": "1", "create-burst": "1"}
	n2 := startWaitingNode(t, "node2", n1.clusterKey, limited)
	c.call(t, n2, http.MethodGet, "/health", nil, nil, http.StatusServiceUnavailable) // not a member yet
	c.call(t, n2, http.MethodGet, "/health/writes", nil, nil, http.StatusServiceUnavailable)
	c.call(t, n1, http.MethodPost, "/admin/join", authJSON,
		[]byte(`{"id":"node2","raft_addr":"`+n2.raftAddr+`","http_addr":"`+n2.httpAddr+`"}`), http.StatusOK)
	c.call(t, n1, http.MethodPost, "/admin/join", authJSON,
		[]byte(`{"id":"node2","raft_addr":"127.0.0.1:1","http_addr":"`+n2.httpAddr+`"}`), http.StatusConflict)
	n3 := startWaitingNode(t, "node3", n1.clusterKey, settings)
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
	// A bulk create spends one create of the rate limit per item.
	limitedSeen = false
	for i := 0; i < 5 && !limitedSeen; i++ {
		body := []byte(`{"links":[{"original_url":"https://example.com/openapi/limited-bulk/` + itoa(i) + `"}]}`)
		r := n2.request(t, http.MethodPost, "/api/v1/urls/bulk", jsonH, body)
		c.check(t, n2, http.MethodPost, "/api/v1/urls/bulk", jsonH, r)
		switch r.status {
		case http.StatusTooManyRequests:
			limitedSeen = true
		case http.StatusOK:
		default:
			t.Errorf("bulk create on the rate-limited node: want 200 or 429, got %v", r)
		}
	}
	if !limitedSeen {
		t.Errorf("5 quick bulk creates with --create-rate 1 --create-burst 1: none was answered 429")
	}

	c.call(t, n1, http.MethodPost, "/admin/leadership-transfer", auth, nil, http.StatusOK)
	leader, followers := waitOneLeader(t, leaderWaitTimeout, nodes...)
	// Through a follower, forwarded to the leader: every server answered,
	// so each has applied_index and replication_lag.
	c.call(t, followers[0], http.MethodGet, "/admin/cluster", auth, nil, http.StatusOK)
	// Edits and bulk creates through a follower are the leader's answers.
	c.call(t, followers[0], http.MethodPatch, "/api/v1/urls/"+fx.domainCode+"?domain="+openapiDomain, jsonH, []byte(`{"title":"Edited through a follower"}`), http.StatusOK)
	r = c.call(t, followers[0], http.MethodPost, "/api/v1/urls/bulk", jsonH, []byte(`{"links":[{"original_url":"https://example.com/openapi/follower-bulk"}]}`), http.StatusOK)
	requireBulk(t, r, http.StatusCreated)
	location := func(r response, want string) {
		t.Helper()
		if got := r.header.Get("Location"); got != want {
			t.Errorf("Location %q, want %q: %v", got, want, r)
		}
	}
	// The password guesses were spent while node1 led. The budgets are
	// the leader's, kept in its memory: the leader since has its own, and
	// a follower hands it the guess.
	fresh := followers[0]
	if fresh == n1 {
		fresh = followers[1]
	}
	location(c.call(t, fresh, http.MethodGet, "/"+fx.protected, http.Header{"X-Link-Password": {openapiPassword}}, nil, http.StatusFound), "https://example.com/openapi/protected")
	location(c.call(t, fresh, http.MethodGet, "/"+fx.domainCode, http.Header{"Host": {openapiDomain}}, nil, http.StatusFound), "https://example.com/openapi/dom")

	// The follower to remove is stopped first: a live one is still a
	// gossip member, which the leader would add back.
	gone, survivor := followers[1], followers[0]
	// A link whose visits are counted, on the survivor before the leader
	// goes (HEAD counts none).
	counted := create(n3, "/api/v1/urls", map[string]any{"original_url": "https://example.com/openapi/counted", "max_visits": 10}, nil, http.StatusCreated)
	if !eventually(5*time.Second, func() bool {
		r, err := survivor.tryRequest(t, http.MethodHead, "/"+counted.ShortCode, nil, nil)
		return err == nil && r.status == http.StatusFound
	}) {
		t.Fatalf("link %s created through %s does not redirect on %s within 5 s", counted.ShortCode, n3.id, survivor.id)
	}
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
		h, err := survivor.tryHealth() // still 200: it serves redirects
		return err == nil && h.Leader == ""
	}) {
		t.Fatalf("node %s still names a leader 10 s after the leader was killed", survivor.id)
	}
	c.call(t, survivor, http.MethodGet, "/health/writes", nil, nil, http.StatusServiceUnavailable) // no_leader
	create(survivor, "/api/v1/urls", map[string]any{"original_url": "https://example.com/openapi/no-leader"}, nil, http.StatusServiceUnavailable)
	c.call(t, survivor, http.MethodDelete, "/api/v1/urls/"+a.ShortCode, nil, nil, http.StatusServiceUnavailable)
	c.call(t, survivor, http.MethodPatch, "/api/v1/urls/"+a.ShortCode, jsonH, []byte(`{"title":"no leader"}`), http.StatusServiceUnavailable)
	c.call(t, survivor, http.MethodPost, "/api/v1/urls/bulk", jsonH, []byte(`{"links":[{"original_url":"https://example.com/openapi/no-leader"}]}`), http.StatusServiceUnavailable)
	// A visit to a link with max_visits is counted by the leader: without
	// one, it is refused rather than let through uncounted.
	c.call(t, survivor, http.MethodGet, "/"+counted.ShortCode, nil, nil, http.StatusServiceUnavailable)
	c.call(t, survivor, http.MethodGet, "/"+counted.ShortCode, http.Header{"Accept": {"text/html"}}, nil, http.StatusServiceUnavailable)

	c.requireAllExercised(t)
}

// managedLink is a link as the API shows it, with what people manage.
type managedLink struct {
	link
	Domain            string           `json:"domain"`
	Title             string           `json:"title"`
	Tags              []string         `json:"tags"`
	MaxVisits         *int64           `json:"max_visits"`
	ValidSince        *string          `json:"valid_since"`
	PasswordProtected bool             `json:"password_protected"`
	ForwardQuery      bool             `json:"forward_query"`
	PublicStats       bool             `json:"public_stats"`
	Rules             []map[string]any `json:"rules"`
}

// problemDetail is the detail of a problem document ("" if r is none).
func problemDetail(r response) string {
	var p struct {
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(r.body, &p)
	return p.Detail
}

func decodeAnswer(t *testing.T, r response, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode answer %v: %v", r, err)
	}
}

// managedFixtures are the links of exerciseManagedLinks later calls use.
type managedFixtures struct {
	protected  string // password "correct horse 1", public_stats
	domainCode string // openapi-dom in domain short.example
}

const (
	openapiDomain   = "short.example"
	openapiPassword = "correct horse 1"
)

// exerciseManagedLinks calls what links people manage have on n, a lone
// node: options on create (JSON and form), unknown fields, domains and
// their Host-based redirects, edits and history, tags, list filters and
// sorts, bulk creates, and redirects guarded by valid_since, max_visits
// and passwords. a is a plain link of the default domain, e an expired one.
func exerciseManagedLinks(t *testing.T, c *contract, n *node, a, e link) managedFixtures {
	jsonH := http.Header{"Content-Type": {"application/json"}}
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	host := func(h http.Header, name string) http.Header {
		h = h.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("Host", name)
		return h
	}
	create := func(fields map[string]any, want int) managedLink {
		t.Helper()
		r := c.call(t, n, http.MethodPost, "/api/v1/urls", jsonH, mustJSON(t, fields), want)
		var l managedLink
		if want < 300 && r.status == want {
			decodeAnswer(t, r, &l)
		}
		return l
	}
	location := func(r response, want string) {
		t.Helper()
		if got := r.header.Get("Location"); got != want {
			t.Errorf("Location %q, want %q: %v", got, want, r)
		}
	}

	// Domains: two registered, one with both redirects.
	r := c.call(t, n, http.MethodPost, "/admin/domains", jsonH, mustJSON(t, map[string]any{
		"domain": "Short.Example", "root_redirect": "https://example.com/openapi/root",
		"not_found_redirect": "https://example.com/openapi/missing",
	}), http.StatusOK)
	var dom struct{ Domain string }
	if decodeAnswer(t, r, &dom); dom.Domain != openapiDomain {
		t.Errorf("registered domain %q, want %q (lower case)", dom.Domain, openapiDomain)
	}
	c.call(t, n, http.MethodPost, "/admin/domains", jsonH, []byte(`{"domain":"spare.example"}`), http.StatusOK)
	c.call(t, n, http.MethodPost, "/admin/domains", jsonH, []byte(`{"domain":"not a domain"}`), http.StatusBadRequest)
	c.call(t, n, http.MethodPost, "/admin/domains", jsonH, []byte(`{"domain":"x.example","root_redirect":"ftp://example.com/"}`), http.StatusBadRequest)
	if r := c.call(t, n, http.MethodPost, "/admin/domains", jsonH, []byte(`{"domain":"x.example","colour":"red"}`), http.StatusBadRequest); !strings.Contains(problemDetail(r), `"colour"`) {
		t.Errorf("unknown field of a domain: detail %q does not name it", problemDetail(r))
	}
	c.call(t, n, http.MethodGet, "/admin/domains", nil, nil, http.StatusOK)

	// Creates with every option, JSON and form; unknown fields refused.
	full := create(map[string]any{
		"original_url": "https://example.com/openapi/full", "custom_code": "openapi-full",
		"title": "Full options", "tags": []string{"OpenAPI", "contract", "openapi"},
		"max_visits": 100, "valid_since": "2020-01-01T00:00:00Z", "forward_query": true, "public_stats": true,
		"rules": []any{
			map[string]any{"when": map[string]any{"device": "android", "language": "pt-BR", "query": map[string]string{"src": "qr"}},
				"url": "https://example.com/openapi/android"},
			map[string]any{"when": map[string]any{"query": map[string]string{"src": "mail"}, "after": "2020-01-01T00:00:00Z", "before": "2099-01-01T00:00:00Z"},
				"url": "https://example.com/openapi/window"},
		},
	}, http.StatusCreated)
	if full.Title != "Full options" || strings.Join(full.Tags, ",") != "OpenAPI,contract" || full.MaxVisits == nil || *full.MaxVisits != 100 ||
		full.ValidSince == nil || *full.ValidSince != "2020-01-01T00:00:00.000Z" || !full.ForwardQuery || !full.PublicStats ||
		full.PasswordProtected || len(full.Rules) != 2 || full.Domain != "" {
		t.Errorf("create with every option answered %+v", full)
	}
	protected := create(map[string]any{"original_url": "https://example.com/openapi/protected", "password": openapiPassword, "public_stats": true}, http.StatusCreated)
	if !protected.PasswordProtected {
		t.Errorf("create with a password: password_protected false")
	}
	once := create(map[string]any{"original_url": "https://example.com/openapi/once", "max_visits": 1}, http.StatusCreated)
	later := create(map[string]any{"original_url": "https://example.com/openapi/later", "valid_since": "2099-01-01T00:00:00Z"}, http.StatusCreated)
	if nulls := create(map[string]any{"original_url": "https://example.com/openapi/nulls", "max_visits": nil, "valid_since": nil, "password": nil}, http.StatusCreated); nulls.MaxVisits != nil || nulls.ValidSince != nil || nulls.PasswordProtected {
		t.Errorf("create with null options: %+v", nulls)
	}
	if r := c.call(t, n, http.MethodPost, "/api/v1/urls", jsonH, []byte(`{"original_url":"https://example.com/openapi/x","colour":"red"}`), http.StatusBadRequest); !strings.Contains(problemDetail(r), `unknown field "colour"`) {
		t.Errorf("create with an unknown field: detail %q does not name it", problemDetail(r))
	}
	create(map[string]any{"original_url": "https://example.com/openapi/x", "password": "short"}, http.StatusBadRequest)
	create(map[string]any{"original_url": "https://example.com/openapi/x", "rules": []any{map[string]any{"when": map[string]any{}, "url": "https://example.com/"}}}, http.StatusBadRequest)
	create(map[string]any{"original_url": "https://example.com/openapi/x", "domain": "nowhere.example"}, http.StatusBadRequest)
	formBody := url.Values{"original_url": {"https://example.com/openapi/form-options"}, "title": {"Form title"}, "tags": {"form, Contract-Form"},
		"max_visits": {"5"}, "valid_since": {""}, "password": {""}, "forward_query": {"on"}, "public_stats": {"0"}}.Encode()
	c.call(t, n, http.MethodPost, "/shorten", form, []byte(formBody), http.StatusCreated)
	c.call(t, n, http.MethodPost, "/shorten", form, []byte("original_url=https%3A%2F%2Fexample.com%2F&colour=red"), http.StatusBadRequest)

	// A deleted custom code is never handed out again.
	gone := create(map[string]any{"original_url": "https://example.com/openapi/gone", "custom_code": "openapi-gone"}, http.StatusCreated)
	c.call(t, n, http.MethodDelete, "/api/v1/urls/"+gone.ShortCode, nil, nil, http.StatusNoContent)
	if r := c.call(t, n, http.MethodPost, "/api/v1/urls", jsonH, mustJSON(t, map[string]any{"original_url": "https://example.com/openapi/gone2", "custom_code": "openapi-gone"}), http.StatusConflict); !strings.Contains(problemDetail(r), "belonged to a deleted link") {
		t.Errorf("create with a deleted custom code: detail %q", problemDetail(r))
	}

	// Links in a domain: the same code in the default domain and in
	// short.example, each served by its Host.
	dl := create(map[string]any{"original_url": "https://example.com/openapi/dom", "custom_code": "openapi-dom", "domain": "Short.Example"}, http.StatusCreated)
	if dl.Domain != openapiDomain || !strings.HasSuffix(dl.ShortURL, "://"+openapiDomain+"/openapi-dom") || dl.ShortCode != "openapi-dom" {
		t.Errorf("create in a domain: domain %q short_url %q short_code %q", dl.Domain, dl.ShortURL, dl.ShortCode)
	}
	create(map[string]any{"original_url": "https://example.com/openapi/dom-default", "custom_code": "openapi-dom"}, http.StatusCreated)
	create(map[string]any{"original_url": "https://example.com/openapi/dom-again", "custom_code": "openapi-dom", "domain": openapiDomain}, http.StatusConflict)

	// Bulk creates: every item valid, then every kind of refusal.
	r = c.call(t, n, http.MethodPost, "/api/v1/urls/bulk", jsonH, mustJSON(t, map[string]any{"links": []any{
		map[string]any{"original_url": "https://example.com/openapi/bulk/1", "title": "Bulk one", "tags": []string{"bulk"}},
		map[string]any{"url": "https://example.com/openapi/bulk-dedupe", "dedupe": true},
		map[string]any{"original_url": "https://example.com/openapi/bulk/3", "custom_code": "openapi-dom2", "domain": openapiDomain},
	}}), http.StatusOK)
	requireBulk(t, r, 201, 201, 201)
	mixed := mustJSON(t, map[string]any{"links": []any{
		map[string]any{"original_url": "https://example.com/openapi/bulk/m1"},
		map[string]any{"original_url": "ftp://example.com/openapi/bulk/m2"},
		map[string]any{"original_url": "https://example.com/openapi/bulk/m3", "colour": "red"},
		map[string]any{"original_url": "https://example.com/openapi/bulk/m4", "custom_code": "openapi-full"},
		map[string]any{"original_url": "https://example.com/openapi/bulk/m5", "domain": "nowhere.example"},
		map[string]any{"original_url": "https://example.com/" + strings.Repeat("x", 2100)},
		map[string]any{"url": "https://example.com/openapi/bulk-dedupe", "dedupe": true},
		map[string]any{"original_url": "https://example.com/openapi/bulk/m8", "custom_code": "admin"},
	}})
	// Items the API refuses make the request one the spec does not
	// describe as valid: only the answer is checked.
	r = n.request(t, http.MethodPost, "/api/v1/urls/bulk", jsonH, mixed)
	c.check(t, n, http.MethodPost, "/api/v1/urls/bulk", jsonH, r)
	requireBulk(t, r, 201, 400, 400, 409, 400, 413, 200, 409)
	c.call(t, n, http.MethodPost, "/api/v1/urls/bulk", jsonH, []byte(`{"links":[]}`), http.StatusBadRequest)
	c.call(t, n, http.MethodPost, "/api/v1/urls/bulk", jsonH, []byte(`{"links":[{"url":"https://example.com/"}],"atomic":true}`), http.StatusBadRequest)
	c.call(t, n, http.MethodPost, "/api/v1/urls/bulk", noCredential(), []byte(`{"links":[{"url":"https://example.com/"}]}`), http.StatusUnauthorized)

	// Redirects by Host: a domain's links, its root and not-found
	// redirects, the default domain's links on every host.
	location(c.call(t, n, http.MethodGet, "/", host(nil, openapiDomain), nil, http.StatusFound), "https://example.com/openapi/root")
	c.call(t, n, http.MethodGet, "/", host(nil, "spare.example"), nil, http.StatusOK)
	location(c.call(t, n, http.MethodGet, "/openapi-dom", host(nil, openapiDomain), nil, http.StatusFound), "https://example.com/openapi/dom")
	location(c.call(t, n, http.MethodHead, "/openapi-dom", host(nil, "SHORT.example:80"), nil, http.StatusFound), "https://example.com/openapi/dom")
	location(c.call(t, n, http.MethodGet, "/openapi-dom", nil, nil, http.StatusFound), "https://example.com/openapi/dom-default")
	location(c.call(t, n, http.MethodGet, "/openapi-dom2", host(nil, openapiDomain), nil, http.StatusFound), "https://example.com/openapi/bulk/3")
	c.call(t, n, http.MethodGet, "/openapi-dom2", nil, nil, http.StatusNotFound)
	location(c.call(t, n, http.MethodGet, "/nosuchcode", host(nil, openapiDomain), nil, http.StatusFound), "https://example.com/openapi/missing")
	location(c.call(t, n, http.MethodHead, "/nosuchcode", host(nil, openapiDomain), nil, http.StatusFound), "https://example.com/openapi/missing")
	location(c.call(t, n, http.MethodHead, "/"+a.ShortCode, host(nil, openapiDomain), nil, http.StatusFound), a.OriginalURL)

	// Every /api/v1/urls/{code}… route names a domain's link with ?domain=.
	q := "?domain=" + openapiDomain
	if r := c.call(t, n, http.MethodGet, "/api/v1/urls/openapi-dom"+q, nil, nil, http.StatusOK); !bytes.Contains(r.body, []byte(`"original_url":"https://example.com/openapi/dom"`)) {
		t.Errorf("read with ?domain=: %v", r)
	}
	c.call(t, n, http.MethodGet, "/api/v1/urls/openapi-dom2", nil, nil, http.StatusNotFound)
	c.call(t, n, http.MethodPatch, "/api/v1/urls/openapi-dom"+q, jsonH, []byte(`{"title":"Domain link","tags":["domain"]}`), http.StatusOK)
	c.call(t, n, http.MethodGet, "/api/v1/urls/openapi-dom/history"+q, nil, nil, http.StatusOK)
	c.call(t, n, http.MethodGet, "/api/v1/urls/openapi-dom/stats"+q, nil, nil, http.StatusOK)
	c.call(t, n, http.MethodGet, "/stats/openapi-dom"+q+"&interval=day", nil, nil, http.StatusOK)
	c.call(t, n, http.MethodGet, "/api/v1/urls/openapi-dom/qr"+q, nil, nil, http.StatusOK)
	c.call(t, n, http.MethodDelete, "/api/v1/urls/openapi-dom2"+q, nil, nil, http.StatusNoContent)
	c.call(t, n, http.MethodGet, "/api/v1/urls/openapi-dom2"+q, nil, nil, http.StatusNotFound)
	if r := c.call(t, n, http.MethodPost, "/api/v1/urls", jsonH, mustJSON(t, map[string]any{"original_url": "https://example.com/openapi/x", "custom_code": "openapi-dom2", "domain": openapiDomain}), http.StatusConflict); !strings.Contains(problemDetail(r), "deleted") {
		t.Errorf("a domain's deleted code: detail %q", problemDetail(r))
	}

	// Domains are removed once they have no links.
	c.call(t, n, http.MethodDelete, "/admin/domains/"+openapiDomain, nil, nil, http.StatusConflict)
	c.call(t, n, http.MethodDelete, "/admin/domains/spare.example", nil, nil, http.StatusNoContent)
	c.call(t, n, http.MethodDelete, "/admin/domains/spare.example", nil, nil, http.StatusNotFound)
	c.call(t, n, http.MethodDelete, "/admin/domains/not_a_domain", nil, nil, http.StatusBadRequest)

	// Edits and the history of targets.
	path := "/api/v1/urls/" + a.ShortCode
	in1h := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r = c.call(t, n, http.MethodPatch, path, jsonH, mustJSON(t, map[string]any{
		"original_url": "https://example.com/openapi/a/edited", "title": "Edited", "tags": []string{"edited"},
		"expires_at": in1h, "max_visits": nil, "valid_since": nil, "password": nil, "forward_query": false,
	}), http.StatusOK)
	var edited managedLink
	if decodeAnswer(t, r, &edited); edited.OriginalURL != "https://example.com/openapi/a/edited" || edited.ExpiresAt == nil || edited.Title != "Edited" {
		t.Errorf("edit answered %+v", edited)
	}
	r = c.call(t, n, http.MethodPatch, path, jsonH, []byte(`{"expires_at":null,"title":"","tags":[],"rules":[]}`), http.StatusOK)
	var cleared managedLink
	if decodeAnswer(t, r, &cleared); cleared.ExpiresAt != nil || cleared.Title != "" || len(cleared.Tags) != 0 {
		t.Errorf("edit clearing fields answered %+v", cleared)
	}
	c.call(t, n, http.MethodPatch, path, jsonH, []byte(`{}`), http.StatusBadRequest)
	c.call(t, n, http.MethodPatch, path, jsonH, []byte(`{"max_visits":0}`), http.StatusBadRequest)
	if r := c.call(t, n, http.MethodPatch, path, jsonH, []byte(`{"domain":"short.example"}`), http.StatusBadRequest); !strings.Contains(problemDetail(r), `"domain"`) {
		t.Errorf("edit of the domain: detail %q does not name the field", problemDetail(r))
	}
	// A rename answers the link under its new code; the old code is
	// retired, so renaming back to it is 409.
	c.call(t, n, http.MethodPost, "/api/v1/urls", jsonH, mustJSON(t, map[string]any{"original_url": "https://example.com/openapi/renamed", "custom_code": "openapi-before"}), http.StatusCreated)
	var renamed managedLink
	if decodeAnswer(t, c.call(t, n, http.MethodPatch, "/api/v1/urls/openapi-before", jsonH, []byte(`{"short_code":"openapi-after"}`), http.StatusOK), &renamed); renamed.ShortCode != "openapi-after" {
		t.Errorf("rename answered %+v", renamed)
	}
	c.call(t, n, http.MethodPatch, "/api/v1/urls/openapi-after", jsonH, []byte(`{"short_code":"openapi-before"}`), http.StatusConflict)
	c.call(t, n, http.MethodPatch, path, jsonH, mustJSON(t, map[string]any{"original_url": "https://example.com/" + strings.Repeat("x", 2100)}), http.StatusRequestEntityTooLarge)
	c.call(t, n, http.MethodPatch, "/api/v1/urls/nosuchcode", jsonH, []byte(`{"title":"x"}`), http.StatusNotFound)
	c.call(t, n, http.MethodPatch, path, noCredential(), []byte(`{"title":"x"}`), http.StatusUnauthorized)
	r = c.call(t, n, http.MethodGet, path+"/history", nil, nil, http.StatusOK)
	var hist struct {
		Versions []struct {
			OriginalURL string `json:"original_url"`
			KeyID       string `json:"key_id"`
		}
	}
	if decodeAnswer(t, r, &hist); len(hist.Versions) != 2 || hist.Versions[0].KeyID != "" || hist.Versions[1].OriginalURL != "https://example.com/openapi/a/edited" || hist.Versions[1].KeyID == "" {
		t.Errorf("history after one edit of the target: %v", r)
	}
	c.call(t, n, http.MethodGet, "/api/v1/urls/"+full.ShortCode+"/history", nil, nil, http.StatusOK)
	c.call(t, n, http.MethodGet, "/api/v1/urls/nosuchcode/history", nil, nil, http.StatusNotFound)
	c.call(t, n, http.MethodGet, "/api/v1/urls/"+e.ShortCode+"/history", nil, nil, http.StatusGone)
	c.call(t, n, http.MethodGet, path+"/history", noCredential(), nil, http.StatusUnauthorized)

	// Tags, and the list's filters and sorts.
	r = c.call(t, n, http.MethodGet, "/api/v1/tags", nil, nil, http.StatusOK)
	if !bytes.Contains(r.body, []byte(`{"tag":"openapi","links":1,`)) {
		t.Errorf("tags: want openapi (lower case) on one link: %v", r)
	}
	c.call(t, n, http.MethodGet, "/api/v1/tags?workspace=team-a", nil, nil, http.StatusOK)
	c.call(t, n, http.MethodGet, "/api/v1/tags", noCredential(), nil, http.StatusUnauthorized)
	waitRaised(t, n, 9) // fsm.LevelVisitRows: renaming tags needs it
	if r := c.call(t, n, http.MethodPut, "/api/v1/tags/OpenAPI", jsonH, []byte(`{"name":"openapi"}`), http.StatusOK); !bytes.Contains(r.body, []byte(`"links":1`)) {
		t.Errorf("rename to the same tag: %v", r)
	}
	c.call(t, n, http.MethodPut, "/api/v1/tags/openapi", jsonH, []byte(`{"name":"two words"}`), http.StatusBadRequest)
	c.call(t, n, http.MethodPut, "/api/v1/tags/nosuchtag", jsonH, []byte(`{"name":"other"}`), http.StatusNotFound)
	c.call(t, n, http.MethodDelete, "/api/v1/tags/nosuchtag", nil, nil, http.StatusNotFound)
	c.call(t, n, http.MethodDelete, "/api/v1/tags/nosuchtag", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n, http.MethodGet, "/robots.txt", noCredential(), nil, http.StatusOK)
	listed := func(query string) []managedLink {
		t.Helper()
		r := c.call(t, n, http.MethodGet, "/api/v1/urls"+query, nil, nil, http.StatusOK)
		var page struct {
			Links      []managedLink `json:"links"`
			NextCursor *string       `json:"next_cursor"`
		}
		decodeAnswer(t, r, &page)
		if page.NextCursor != nil {
			c.call(t, n, http.MethodGet, "/api/v1/urls"+query+"&cursor="+*page.NextCursor, nil, nil, http.StatusOK)
		}
		return page.Links
	}
	if l := listed("?tag=CONTRACT"); len(l) != 1 || l[0].ShortCode != full.ShortCode {
		t.Errorf("list ?tag=CONTRACT: %v, want only %s", l, full.ShortCode)
	}
	if l := listed("?q=full+OPTIONS"); len(l) != 1 || l[0].ShortCode != full.ShortCode {
		t.Errorf("list ?q=full+OPTIONS: %v, want only %s", l, full.ShortCode)
	}
	if l := listed("?domain=" + openapiDomain); len(l) != 1 || l[0].Domain != openapiDomain {
		t.Errorf("list ?domain=%s: %v", openapiDomain, l)
	}
	for _, l := range listed("?domain=&limit=1000") {
		if l.Domain != "" {
			t.Errorf("list ?domain= (the default domain) holds %s of domain %s", l.ShortCode, l.Domain)
		}
	}
	listed("?sort=clicks&limit=2")
	listed("?sort=created&tag=bulk&q=bulk&domain=&limit=1")
	c.call(t, n, http.MethodGet, "/api/v1/urls?sort=title", nil, nil, http.StatusBadRequest)

	// Guarded redirects: rules and query forwarding, valid_since,
	// max_visits, passwords.
	android := http.Header{"User-Agent": {"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/120.0 Mobile Safari/537.36"}, "Accept-Language": {"pt-BR,pt;q=0.9"}}
	location(c.call(t, n, http.MethodHead, "/openapi-full?src=qr", android, nil, http.StatusFound), "https://example.com/openapi/android?src=qr")
	location(c.call(t, n, http.MethodHead, "/openapi-full?src=mail", nil, nil, http.StatusFound), "https://example.com/openapi/window?src=mail")
	location(c.call(t, n, http.MethodGet, "/openapi-full?src=web", nil, nil, http.StatusFound), "https://example.com/openapi/full?src=web")
	c.call(t, n, http.MethodPost, "/openapi-full", form, []byte("password=whatever1"), http.StatusMethodNotAllowed)
	c.call(t, n, http.MethodPost, "/"+a.ShortCode, form, []byte("password=whatever1"), http.StatusMethodNotAllowed)
	c.call(t, n, http.MethodPost, "/nosuchcode", form, []byte("password=whatever1"), http.StatusNotFound)

	c.call(t, n, http.MethodGet, "/"+later.ShortCode, nil, nil, http.StatusNotFound)
	c.call(t, n, http.MethodHead, "/"+later.ShortCode, nil, nil, http.StatusNotFound)
	location(c.call(t, n, http.MethodGet, "/"+later.ShortCode, host(nil, openapiDomain), nil, http.StatusFound), "https://example.com/openapi/missing")
	c.call(t, n, http.MethodGet, "/api/v1/urls/"+later.ShortCode, nil, nil, http.StatusOK)

	location(c.call(t, n, http.MethodGet, "/"+once.ShortCode, nil, nil, http.StatusFound), "https://example.com/openapi/once")
	c.call(t, n, http.MethodGet, "/"+once.ShortCode, nil, nil, http.StatusGone)
	c.call(t, n, http.MethodGet, "/"+once.ShortCode, http.Header{"Accept": {"text/html"}}, nil, http.StatusGone)
	c.call(t, n, http.MethodHead, "/"+once.ShortCode, nil, nil, http.StatusGone)

	// Password guesses are limited to a burst of 5 per client: these are 5.
	pw := "/" + protected.ShortCode
	if r := c.call(t, n, http.MethodGet, pw, nil, nil, http.StatusUnauthorized); problemDetail(r) != "this link is protected by a password: send it in X-Link-Password" {
		t.Errorf("protected link without a password: %v", r)
	}
	c.call(t, n, http.MethodGet, pw, http.Header{"Accept": {"text/html"}}, nil, http.StatusUnauthorized)
	c.call(t, n, http.MethodHead, pw, nil, nil, http.StatusUnauthorized)
	location(c.call(t, n, http.MethodGet, pw, http.Header{"X-Link-Password": {openapiPassword}}, nil, http.StatusFound), "https://example.com/openapi/protected")
	location(c.call(t, n, http.MethodPost, pw, form, []byte(url.Values{"password": {openapiPassword}}.Encode()), http.StatusFound), "https://example.com/openapi/protected")
	location(c.call(t, n, http.MethodHead, pw, http.Header{"X-Link-Password": {openapiPassword}}, nil, http.StatusFound), "https://example.com/openapi/protected")
	c.call(t, n, http.MethodPost, pw, with(form, "Accept", "text/html"), []byte("password=wrong-password"), http.StatusUnauthorized)
	if r := c.call(t, n, http.MethodGet, pw, http.Header{"X-Link-Password": {"wrong-password"}}, nil, http.StatusUnauthorized); problemDetail(r) != "wrong password" {
		t.Errorf("protected link with a wrong password: %v", r)
	}
	limited := false
	for i := 0; i < 5 && !limited; i++ {
		h := http.Header{"X-Link-Password": {"wrong-password"}}
		r := n.request(t, http.MethodGet, pw, h, nil)
		c.check(t, n, http.MethodGet, pw, h, r)
		switch r.status {
		case http.StatusTooManyRequests:
			limited = true
		case http.StatusUnauthorized:
		default:
			t.Errorf("password guess %d: want 401 or 429, got %v", i+6, r)
		}
	}
	if !limited {
		t.Errorf("10 password guesses in a row: none was answered 429")
	}
	c.call(t, n, http.MethodPost, pw, with(form, "Accept", "text/html"), []byte("password=wrong-password"), http.StatusTooManyRequests)

	// Public stats: without a credential for a link with public_stats and
	// no password, never for one with a password.
	c.call(t, n, http.MethodGet, "/api/v1/urls/"+full.ShortCode+"/stats", noCredential(), nil, http.StatusOK)
	c.call(t, n, http.MethodGet, "/stats/"+full.ShortCode+"?interval=day", noCredential(), nil, http.StatusOK)
	c.call(t, n, http.MethodGet, "/api/v1/urls/"+protected.ShortCode+"/stats", noCredential(), nil, http.StatusUnauthorized)
	c.call(t, n, http.MethodGet, "/stats/"+once.ShortCode, noCredential(), nil, http.StatusUnauthorized)

	return managedFixtures{protected: protected.ShortCode, domainCode: dl.ShortCode}
}

// requireBulk requires a bulk answer with these statuses, in order.
func requireBulk(t *testing.T, r response, want ...int) {
	t.Helper()
	var bulk struct {
		Results []struct {
			Status int `json:"status"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &bulk); err != nil || len(bulk.Results) != len(want) {
		t.Fatalf("bulk answer %v: want %d results (%v)", r, len(want), err)
	}
	for i, w := range want {
		if got := bulk.Results[i].Status; got != w {
			t.Errorf("bulk item %d: status %d, want %d: %s", i, got, w, r.body)
		}
	}
}

func with(h http.Header, k, v string) http.Header {
	h = h.Clone()
	h.Set(k, v)
	return h
}
