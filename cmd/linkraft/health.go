package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// healthCmd is "linkraft health": one GET /health, exit 0 when the node
// answers 200 with status "healthy" (ready: it can serve its cluster's
// links), else 1 with a one-line reason. It is the container image's
// HEALTHCHECK, where there is no shell or curl, so it takes everything from
// flags and the environment and prints little. Readiness by default: a
// container's health is what Compose's depends_on and most orchestrators
// route by, and a node outside any cluster serves nothing useful; --live
// asks /health/live instead, for a supervisor that only restarts.
func healthCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("health", "health [--addr URL] [--timeout D] [--live]", stderr)
	addr := fs.String("addr", defaultHealthAddr(), "HTTP address of the node: http(s)://host:port or host:port "+
		"(env LINKRAFT_ADDR; unset: this machine's port of LINKRAFT_HTTP_ADDR, else "+defaultAdminAddr+")")
	timeout := fs.Duration("timeout", 5*time.Second, "fail when the node has not answered within this time (env LINKRAFT_TIMEOUT)")
	live := fs.Bool("live", false, "ask liveness (/health/live: the process and its Raft run) instead of readiness (/health)")
	pos, code := parseArgs(fs, args, stderr, "addr", "timeout")
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected arguments: %v", pos)
	}
	if *timeout <= 0 {
		return usageError(fs, stderr, "--timeout must be positive")
	}
	base, err := normalizeAddr(*addr)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	path, want := "/health", "healthy"
	if *live {
		path, want = "/health/live", "alive"
	}
	if err := checkHealth(base, path, want, *timeout); err != nil {
		fmt.Fprintln(stderr, "linkraft health: unhealthy:", err)
		return 1
	}
	fmt.Fprintln(stdout, want)
	return 0
}

// defaultHealthAddr is where the node on this machine listens. Inside the
// container LINKRAFT_HTTP_ADDR is the server's own setting (":8080" in the
// image), so a HEALTHCHECK follows an operator who moves the port without
// being told twice. An unspecified or empty host means loopback works.
func defaultHealthAddr() string {
	listen, ok := os.LookupEnv("LINKRAFT_HTTP_ADDR")
	if !ok {
		return defaultAdminAddr
	}
	host, port, err := net.SplitHostPort(strings.TrimSpace(listen))
	if err != nil {
		return defaultAdminAddr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// checkHealth asks base for path and says why the answer is not status
// want, in one line.
func checkHealth(base, path, want string, timeout time.Duration) error {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(base + path)
	req.Header.Set(fasthttp.HeaderAccept, "application/json")
	client := &fasthttp.Client{
		Name: "linkraft-health/" + version, ReadTimeout: timeout, WriteTimeout: timeout,
		MaxIdemponentCallAttempts: 1,
	}
	if err := client.DoTimeout(req, resp, timeout); err != nil {
		if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) {
			return fmt.Errorf("no answer from %s within %s", base, timeout)
		}
		return fmt.Errorf("cannot reach %s: %v", base, err)
	}
	var h struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
		Role   string `json:"role"`
	}
	decodeErr := json.Unmarshal(resp.Body(), &h)
	switch {
	case resp.StatusCode() != fasthttp.StatusOK && decodeErr == nil && h.Status != "":
		msg := fmt.Sprintf("%s answered %d: status %q, role %q", base, resp.StatusCode(), h.Status, h.Role)
		if h.Reason != "" {
			msg += fmt.Sprintf(", reason %q", h.Reason)
		}
		return errors.New(msg)
	case resp.StatusCode() != fasthttp.StatusOK:
		return fmt.Errorf("%s answered %d", base, resp.StatusCode())
	case decodeErr != nil:
		return fmt.Errorf("%s%s is not a linkraft health document: %v", base, path, decodeErr)
	case h.Status != want:
		return fmt.Errorf("%s says status %q, role %q", base, h.Status, h.Role)
	}
	return nil
}
