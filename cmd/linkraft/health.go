package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// healthCmd is "linkraft health": one GET /health, exit 0 when the node
// answers 200 with status "healthy" (ready: it can serve its cluster's
// links), else 1 with a one-line reason. It is the container image's
// HEALTHCHECK, where there is no shell or curl, so it takes everything from
// flags and the environment and prints little. Readiness by default: a
// container's health is what Compose's depends_on and most orchestrators
// route by, and a node outside any cluster serves nothing useful; --live
// asks /health/live instead, for a supervisor that only restarts, and
// --writes asks /health/writes, for a check that a create would be
// accepted now (a node without a leader serves redirects, not writes).
func healthCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("health", "health [--addr URL] [--timeout D] [--live | --writes]", stderr)
	var conn connFlags
	conn.register(fs, defaultHealthAddr(), 5*time.Second)
	fs.Lookup("addr").Usage = "address of the node: https://host:port, http://host:port, or host:port for http " +
		"(env LINKRAFT_ADDR; unset: this machine's port of LINKRAFT_HTTP_ADDR, else " + defaultAdminAddr + ")"
	fs.Lookup("timeout").Usage = "fail when the node has not answered within this time (env LINKRAFT_TIMEOUT)"
	live := fs.Bool("live", false, "ask liveness (/health/live: the process and its Raft run) instead of readiness (/health)")
	writes := fs.Bool("writes", false, "ask whether a create through the node would be accepted now (/health/writes) instead of readiness (/health)")
	pos, code := parseArgs(fs, args, stderr, connEnv()...)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected arguments: %v", pos)
	}
	if *live && *writes {
		return usageError(fs, stderr, "--live and --writes ask different questions: give one")
	}
	c, err := conn.client("health", "", stderr)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	c.userAgent = "linkraft-health/" + version
	path, want := "/health", "healthy"
	switch {
	case *live:
		path, want = "/health/live", "alive"
	case *writes:
		path, want = "/health/writes", "writable"
	}
	if err := checkHealth(c, path, want); err != nil {
		// One line: it is what the container runtime's health log keeps.
		msg := err.Error()
		var ae *adminError
		if errors.As(err, &ae) && ae.hint != "" {
			msg += " (" + ae.hint + ")"
		}
		fmt.Fprintln(stderr, "linkraft health: unhealthy:", msg)
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

// checkHealth asks the node for path and says why the answer is not
// status want, in one line.
func checkHealth(c *apiClient, path, want string) error {
	a, err := c.exchange(http.MethodGet, path, "", nil)
	if err != nil {
		return err
	}
	var h struct {
		Status       string `json:"status"`
		Reason       string `json:"reason"`
		Role         string `json:"role"`
		WritesReason string `json:"writes_reason"`
	}
	decodeErr := json.Unmarshal(a.body, &h)
	switch {
	case a.status != http.StatusOK && decodeErr == nil && h.Status != "":
		msg := fmt.Sprintf("%s answered %d: status %q, role %q", c.base, a.status, h.Status, h.Role)
		if h.Reason != "" {
			msg += fmt.Sprintf(", reason %q", h.Reason)
		} else if h.WritesReason != "" {
			msg += fmt.Sprintf(", writes %q", h.WritesReason)
		}
		return errors.New(msg)
	case a.status != http.StatusOK:
		return fmt.Errorf("%s answered %d", c.base, a.status)
	case decodeErr != nil:
		return fmt.Errorf("%s%s is not a linkraft health document: %w", c.base, path, decodeErr)
	case h.Status != want:
		return fmt.Errorf("%s says status %q, role %q", c.base, h.Status, h.Role)
	}
	return nil
}
