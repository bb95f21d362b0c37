package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Every subcommand that talks to a node (status, join, leave, promote,
// transfer, backup, restore, keys, links, import, health) reaches it
// through the one client made here: the same flags name the node and say
// which certificate to trust, a plain-HTTP node that sends its clients to
// HTTPS is followed the same way, and only a 2xx answer counts as done.

const defaultAdminAddr = "http://127.0.0.1:8080"

// connFlags say how to reach a node. Every client subcommand registers
// them (register) and reads their environment variables (connEnv), so
// that an HTTPS node is reached the same way by all of them.
type connFlags struct {
	addr, caFile, serverName string
	timeout                  time.Duration
}

func (f *connFlags) register(fs *flag.FlagSet, addr string, timeout time.Duration) {
	fs.StringVar(&f.addr, "addr", addr, "address of any node: https://host:port, http://host:port, or host:port for http (env LINKRAFT_ADDR)")
	fs.StringVar(&f.caFile, "ca-file", "", "PEM bundle of CA certificates to trust besides the system's, for a node whose certificate a private or test CA signed (env LINKRAFT_CA_FILE)")
	fs.StringVar(&f.serverName, "server-name", "", "name the node's certificate must hold, when --addr names the node by IP address or by another name (env LINKRAFT_SERVER_NAME)")
	fs.DurationVar(&f.timeout, "timeout", timeout, "give up when the node has not answered within this time (env LINKRAFT_TIMEOUT)")
}

// connEnv names the flags that read LINKRAFT_<NAME>: the connection
// flags, and more. A new slice each time, so no caller changes another's.
func connEnv(more ...string) []string {
	return append([]string{"addr", "ca-file", "server-name", "timeout"}, more...)
}

// normalizeAddr turns --addr into a base URL without a trailing slash:
// host:port gets http://, which is what a node without TLS speaks (and one
// with TLS answers with a 308 to its HTTPS port), a bare :port means this
// machine.
func normalizeAddr(addr string) (string, error) {
	a := strings.TrimSpace(addr)
	if a == "" {
		return "", errors.New("--addr is empty")
	}
	if !strings.Contains(a, "://") {
		if strings.HasPrefix(a, ":") {
			a = "127.0.0.1" + a
		}
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %w", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("--addr %q: scheme must be http or https", addr)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--addr %q: want http(s)://host:port or host:port", addr)
	}
	return u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), nil
}

// tlsConfig is what the client trusts: the system's roots, plus
// --ca-file's certificates, and --server-name as the name to verify.
func (f *connFlags) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if name := strings.TrimSpace(f.serverName); name != "" {
		if strings.ContainsAny(name, "/ \t") {
			return nil, fmt.Errorf("--server-name %q: want a host name, such as the one in the node's certificate", f.serverName)
		}
		if _, _, err := net.SplitHostPort(name); err == nil {
			return nil, fmt.Errorf("--server-name %q: want a name without a port", f.serverName)
		}
		cfg.ServerName = name
	}
	if f.caFile == "" {
		return cfg, nil // nil RootCAs: the system's
	}
	pem, err := os.ReadFile(f.caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	// Added to the system's roots rather than replacing them: the same
	// command line then works against a node with a public certificate.
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool() // a machine without a readable store still trusts the bundle
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", f.caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// apiClient sends the requests of one command to one node.
type apiClient struct {
	cmd        string
	base       string // scheme://host[:port][/prefix], no trailing slash
	credential string // sent as a bearer token; "" sends none
	timeout    time.Duration
	userAgent  string
	http       *http.Client
	caFile     string
	// stderr hears about the one redirect a command follows.
	stderr io.Writer
	// followed is set once a 308 to https was followed: the base is the
	// HTTPS one from then on, and no later answer moves it again.
	followed bool
	// need names the scope a 403 is missing; "" means admin.
	need string
}

// client makes the client of command cmd.
func (f *connFlags) client(cmd, credential string, stderr io.Writer) (*apiClient, error) {
	base, err := normalizeAddr(f.addr)
	if err != nil {
		return nil, err
	}
	if f.timeout <= 0 {
		return nil, errors.New("--timeout must be positive")
	}
	tlsCfg, err := f.tlsConfig()
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		// No proxy from the environment: an admin command talks to the
		// node it names, as it always has.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: f.timeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: f.timeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
	return &apiClient{
		cmd: cmd, base: base, credential: credential, timeout: f.timeout,
		userAgent: "linkraft-cli/" + version, caFile: f.caFile, stderr: stderr,
		http: &http.Client{
			Transport: transport,
			Timeout:   f.timeout,
			// Redirects are decided by exchange, which follows one kind
			// only and says so.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// adminError is a request that failed: the node's answer, or no answer.
type adminError struct {
	status int    // 0 when the node did not answer
	msg    string // "<status> <detail>", or why there was no answer
	hint   string
}

func (e *adminError) Error() string { return e.msg }

// answer is what a node finally answered: never a 3xx.
type answer struct {
	status int
	body   []byte
}

// reply is one HTTP exchange's answer.
type reply struct {
	status   int
	location string
	body     []byte
}

// exchange sends one request and returns the node's answer, following a
// 308 from a plain http:// base to https on the same host once per
// command (followRedirect has the rule). Any other 3xx, or a second one,
// is an *adminError: a redirect is never a command's result.
func (c *apiClient) exchange(method, path, contentType string, body *io.SectionReader) (answer, error) {
	r, err := c.send(method, path, contentType, body)
	if err != nil {
		return answer{}, err
	}
	if isRedirect(r.status) {
		next, err := followRedirect(c.base, path, r.status, r.location, c.followed)
		if err != nil {
			return answer{}, err
		}
		fmt.Fprintf(c.stderr, "linkraft %s: %s answered %d %s to https; going on at %s. --addr %s goes there directly%s.\n",
			c.cmd, c.base, r.status, http.StatusText(r.status), next, next, c.plainCredentialNote())
		c.base, c.followed = next, true
		if r, err = c.send(method, path, contentType, body); err != nil {
			return answer{}, err
		}
		if isRedirect(r.status) {
			_, err := followRedirect(c.base, path, r.status, r.location, c.followed)
			return answer{}, err
		}
	}
	return answer{status: r.status, body: r.body}, nil
}

// plainCredentialNote tells the user, when it is so, that the first
// request carried the credential over plain HTTP.
func (c *apiClient) plainCredentialNote() string {
	if c.credential == "" {
		return ""
	}
	return ", without sending the credential over plain HTTP first"
}

func isRedirect(status int) bool { return status >= 300 && status <= 399 }

// followRedirect is the base to go on at when the node answered a
// request for base+path with status and location, or why not.
//
// Only a 308: it keeps the method and the body, where a 301 or 302 may
// turn a POST into a GET. Only from a plain http:// base, once: it is the
// upgrade to HTTPS a node with TLS answers plain HTTP with, nothing else.
// Only to https on the same host (name or address as --addr gives it), so
// the certificate is verified for the host the user named (or
// --server-name). On any port: HTTPS listens on a port of its own, 443
// or the node's --https-addr, which the 308 names, while --addr had the
// plain HTTP port; the certificate check decides whether what answers
// there is the node meant. Only with the same path and query, so that the
// redirect changes nothing but where the request goes.
func followRedirect(base, path string, status int, location string, followed bool) (string, error) {
	refuse := func(target, why, suggest string) error {
		if suggest == "" {
			suggest = "https://…"
		}
		return &adminError{status: status, msg: fmt.Sprintf("the node answered %d %s to %s, which is not followed (%s); use --addr %s",
			status, http.StatusText(status), target, why, suggest)}
	}
	if location == "" {
		return "", &adminError{status: status, msg: fmt.Sprintf("the node answered %d %s without a Location; use --addr https://…",
			status, http.StatusText(status))}
	}
	from, err := url.Parse(base + path)
	if err != nil {
		return "", fmt.Errorf("request URL %s: %w", base+path, err)
	}
	loc, err := url.Parse(location)
	if err != nil {
		return "", refuse(location, "not a URL", "")
	}
	to := from.ResolveReference(loc)
	prefix := strings.TrimPrefix(base, from.Scheme+"://"+from.Host)
	suggest := ""
	if to.Scheme == "https" && sameHost(from.Hostname(), to.Hostname()) {
		suggest = "https://" + to.Host + prefix
	}
	switch {
	case followed:
		return "", refuse(to.String(), "a redirect was followed already", suggest)
	case from.Scheme != "http":
		return "", refuse(to.String(), "only a plain http:// address is sent on to https", suggest)
	case status != http.StatusPermanentRedirect:
		return "", refuse(to.String(), "only a 308 to https is", suggest)
	case to.Scheme != "https":
		return "", refuse(to.String(), "not https", "")
	case to.User != nil:
		return "", refuse(to.Redacted(), "it carries user information", "")
	case !sameHost(from.Hostname(), to.Hostname()):
		return "", refuse(to.String(), "another host than "+from.Hostname(), "")
	case to.RequestURI() != from.RequestURI():
		return "", refuse(to.String(), "another path than "+from.RequestURI(), suggest)
	}
	return suggest, nil
}

// sameHost reports whether a and b name the same host: the same name
// (case and a final dot aside), or the same IP address however written.
func sameHost(a, b string) bool {
	if ipA, ipB := net.ParseIP(a), net.ParseIP(b); ipA != nil || ipB != nil {
		return ipA != nil && ipB != nil && ipA.Equal(ipB)
	}
	return a != "" && strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

// send makes one HTTP exchange with the current base and reads the whole
// answer; a failure to get one is an *adminError that says why. The body
// is read from its start on each send (a followed 308 sends it again),
// and never held in memory here: a backup to restore may be large.
func (c *apiClient) send(method, path, contentType string, body *io.SectionReader) (reply, error) {
	var rd io.Reader
	if body != nil {
		rd = io.NewSectionReader(body, 0, body.Size())
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return reply{}, fmt.Errorf("build the request %s %s: %w", method, c.base+path, err)
	}
	if body != nil {
		req.ContentLength = body.Size()
	}
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json, application/problem+json, */*")
	if c.credential != "" {
		req.Header.Set("Authorization", "Bearer "+c.credential)
	}
	if body != nil && contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return reply{}, c.transportError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, c.transportError(err)
	}
	return reply{status: resp.StatusCode, location: resp.Header.Get("Location"), body: data}, nil
}

// transportError says why there was no answer, with a hint at the flag
// that helps where there is one.
func (c *apiClient) transportError(err error) *adminError {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // its text repeats the method and URL
	}
	var (
		nerr      net.Error
		hostErr   x509.HostnameError
		authErr   x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		recordErr tls.RecordHeaderError
	)
	reach := &adminError{msg: fmt.Sprintf("cannot reach %s: %v", c.base, err),
		hint: "is a linkraft node listening there? (--addr, LINKRAFT_ADDR)"}
	switch {
	case errors.As(err, &hostErr):
		return &adminError{msg: fmt.Sprintf("cannot verify the certificate of %s: %v", c.base, err), hint: hostnameHint(hostErr)}
	case errors.As(err, &authErr):
		hint := "give the PEM file of the CA that signed the node's certificate with --ca-file (LINKRAFT_CA_FILE)"
		if c.caFile != "" {
			hint = "the CA that signed the node's certificate is neither one of the system's nor in --ca-file " + c.caFile
		}
		return &adminError{msg: fmt.Sprintf("cannot verify the certificate of %s: %v", c.base, err), hint: hint}
	case errors.As(err, &invalid):
		return &adminError{msg: fmt.Sprintf("cannot verify the certificate of %s: %v", c.base, err)}
	case errors.As(err, &recordErr) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// net/http turns the record error into an error of its own,
		// known by its text only.
		reach.hint = "that port answers plain HTTP, not TLS: use --addr http://… (a node with TLS sends that on to its HTTPS port)"
	case errors.As(err, &nerr) && nerr.Timeout():
		reach.msg = fmt.Sprintf("no answer from %s within %s", c.base, c.timeout)
		reach.hint = "is a linkraft node listening there? (--addr, LINKRAFT_ADDR; --timeout for slow operations)"
	case strings.HasPrefix(c.base, "http://"):
		reach.hint = "is a linkraft node listening there? (--addr, LINKRAFT_ADDR; an HTTPS port needs --addr https://…)"
	}
	return reach
}

// hostnameHint names what the certificate holds, for --server-name.
func hostnameHint(e x509.HostnameError) string {
	var names []string
	if e.Certificate != nil {
		names = e.Certificate.DNSNames
	}
	if len(names) == 0 {
		return "give the name the node's certificate holds with --server-name (LINKRAFT_SERVER_NAME)"
	}
	return fmt.Sprintf("the node's certificate is for %s: give --server-name %s (LINKRAFT_SERVER_NAME), or an --addr with that name",
		strings.Join(names, ", "), names[0])
}

// do sends one request and returns the body of a 2xx answer; anything else
// is an *adminError with the node's problem detail.
func (c *apiClient) do(method, path, contentType string, body []byte) ([]byte, error) {
	var rd *io.SectionReader
	if body != nil {
		rd = io.NewSectionReader(bytes.NewReader(body), 0, int64(len(body)))
	}
	return c.doReader(method, path, contentType, rd)
}

// doReader is do with a body read from r.
func (c *apiClient) doReader(method, path, contentType string, r *io.SectionReader) ([]byte, error) {
	a, err := c.exchange(method, path, contentType, r)
	if err != nil {
		return nil, err
	}
	if a.status >= 200 && a.status <= 299 {
		return a.body, nil
	}
	e := &adminError{status: a.status, msg: fmt.Sprintf("%d %s", a.status, problemDetail(a.status, a.body))}
	switch {
	case a.status == http.StatusUnauthorized && c.credential == "" && c.need != "":
		e.hint = "give an API key with the " + c.need + " scope with --key or LINKRAFT_KEY (linkraft keys create makes one)"
	case a.status == http.StatusUnauthorized && c.credential == "":
		e.hint = "give an admin API key with --key or LINKRAFT_KEY (a new cluster writes one to <data-dir>/admin.key), or --admin-token"
	case a.status == http.StatusUnauthorized:
		e.hint = "the key was not accepted: is it revoked or expired?"
	case a.status == http.StatusForbidden && c.need != "":
		e.hint = "this call needs a key with the " + c.need + " scope on the link's workspace"
	case a.status == http.StatusForbidden:
		e.hint = "this call needs a key with the admin scope"
	}
	return nil, e
}
