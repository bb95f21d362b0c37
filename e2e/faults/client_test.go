package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// client sends the workload's requests and turns answers into operations.
type client struct {
	hc      *fasthttp.Client
	timeout time.Duration // per request, a little above --write-timeout
	token   string        // the nodes' --admin-token: admin calls
	key     string        // an API key: the workload's link calls, once made
	start   time.Time     // the history's time origin
	hist    *History
	// visitor turns through browserVisitors, so clicks carry several
	// browsers and referrers for the breakdown check.
	visitor atomic.Uint64
}

// browserVisitors are the User-Agent and Referer the workload's requests
// take turns sending: all people, since bots are left out of the click
// counts the click checkers compare with acknowledged redirects.
var browserVisitors = [][2]string{
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "https://news.example.com/a"},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", ""},
	{"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0", "https://mail.example.org/"},
}

func newHTTPClient() *fasthttp.Client {
	return &fasthttp.Client{
		MaxConnsPerHost:     64,
		MaxIdleConnDuration: 5 * time.Second,
		ReadTimeout:         10 * time.Second,
		WriteTimeout:        10 * time.Second,
		// Never follow redirects; Do does not either, but be explicit
		// about never retrying a request whose answer was lost.
		RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) { return false, false },
	}
}

// answer is one HTTP exchange's result.
type answer struct {
	status   int
	location string
	body     []byte
	err      error
}

// do sends one request to addr, bounded by timeout, with the workload's
// key, or the admin token for admin calls and until the key is made.
func (c *client) do(method, addr, path string, body []byte, timeout time.Duration) answer {
	credential := c.token
	if c.key != "" && !strings.HasPrefix(path, "/admin/") {
		credential = c.key
	}
	return c.doAs(credential, method, addr, path, body, timeout)
}

// doAs is do with the given credential ("" for none).
func (c *client) doAs(credential, method, addr, path string, body []byte, timeout time.Duration) answer {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + addr + path)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	if credential != "" {
		req.Header.Set("Authorization", "Bearer "+credential)
	}
	if method == fasthttp.MethodHead {
		resp.SkipBody = true
	}
	v := browserVisitors[c.visitor.Add(1)%uint64(len(browserVisitors))]
	req.Header.SetUserAgent(v[0])
	if v[1] != "" {
		req.Header.SetReferer(v[1])
	}
	if err := c.hc.DoTimeout(req, resp, timeout); err != nil {
		return answer{err: err}
	}
	return answer{status: resp.StatusCode(), location: string(resp.Header.Peek("Location")), body: append([]byte(nil), resp.Body()...)}
}

func (c *client) now() int64 { return int64(time.Since(c.start)) }

// linkAnswer is the part of a link answer the checkers use.
type linkAnswer struct {
	Code     string `json:"short_code"`
	URL      string `json:"original_url"`
	Existing bool   `json:"existing"`
	Detail   string `json:"detail"`
}

// createOp posts a create and records it.
func (c *client) createOp(proc int, kind Kind, n *fnode, fields map[string]any) Op {
	body, _ := json.Marshal(fields)
	op := Op{Client: proc, Kind: kind, Node: n.id, URL: fmt.Sprint(fields["url"]), Invoke: c.now()}
	if code, ok := fields["custom_code"].(string); ok {
		op.Code = code
	}
	a := c.do(fasthttp.MethodPost, n.httpAddr, "/api/v1/urls", body, c.timeout)
	op.Complete = c.now()
	classify(&op, a)
	var l linkAnswer
	_ = json.Unmarshal(a.body, &l)
	if op.Outcome == Ok {
		op.Code, op.RespURL, op.Existing = l.Code, l.URL, l.Existing
	} else if op.Err == "" {
		op.Err = l.Detail
	}
	return c.hist.Add(op)
}

// readOp reads a code by redirect (GET or HEAD /{code}) or through the API.
func (c *client) readOp(proc int, kind Kind, n *fnode, code string) Op {
	method, path := fasthttp.MethodGet, "/"+code
	switch kind {
	case Read:
		path = "/api/v1/urls/" + code
	case Final:
		method = fasthttp.MethodHead
	}
	op := Op{Client: proc, Kind: kind, Node: n.id, Code: code, Invoke: c.now()}
	a := c.do(method, n.httpAddr, path, nil, c.timeout)
	op.Complete = c.now()
	classify(&op, a)
	if a.status == 404 {
		op.Outcome = Ok // a definite miss is an answer
	}
	op.RespURL = a.location
	if kind == Read && a.status == 200 {
		var l linkAnswer
		_ = json.Unmarshal(a.body, &l)
		op.RespURL = l.URL
	}
	return c.hist.Add(op)
}

// editOp changes a code's target to url with PATCH /api/v1/urls/{code}
// and records it: the target sent, and the original_url a 200 answered.
func (c *client) editOp(proc int, n *fnode, code, url string) Op {
	body, _ := json.Marshal(map[string]string{"original_url": url})
	op := Op{Client: proc, Kind: Edit, Node: n.id, Code: code, URL: url, Invoke: c.now()}
	a := c.do(fasthttp.MethodPatch, n.httpAddr, "/api/v1/urls/"+code, body, c.timeout)
	op.Complete = c.now()
	classify(&op, a)
	var l linkAnswer
	_ = json.Unmarshal(a.body, &l)
	if op.Outcome == Ok {
		op.RespURL = l.URL
	} else if op.Err == "" {
		op.Err = l.Detail
	}
	return c.hist.Add(op)
}

// deleteOp deletes a code.
func (c *client) deleteOp(proc int, n *fnode, code string) Op {
	op := Op{Client: proc, Kind: Delete, Node: n.id, Code: code, Invoke: c.now()}
	a := c.do(fasthttp.MethodDelete, n.httpAddr, "/api/v1/urls/"+code, nil, c.timeout)
	op.Complete = c.now()
	classify(&op, a)
	return c.hist.Add(op)
}

// classify sets status and outcome: 2xx/3xx ok, 4xx a definite refusal,
// anything else (5xx, no answer) indeterminate.
func classify(op *Op, a answer) {
	op.Status = a.status
	switch {
	case a.err != nil:
		op.Outcome, op.Err = Info, errText(a.err)
	case a.status < 400:
		op.Outcome = Ok
	case a.status < 500:
		op.Outcome = Fail
	default:
		op.Outcome, op.Err = Info, fmt.Sprintf("%d %.200s", a.status, a.body)
	}
}

func errText(err error) string {
	if errors.Is(err, fasthttp.ErrTimeout) {
		return "timeout"
	}
	return err.Error()
}
