package httpd

import (
	"crypto/tls"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/certs"
)

// TLS is how the node serves HTTPS, when it does.
type TLS struct {
	// Config is the listener's TLS configuration (NewTLSConfig).
	Config *tls.Config
	// Port is the HTTPS port, for the redirects plain HTTP answers
	// ("443" leaves it out of the address).
	Port string
	// RedirectHTTP answers plain HTTP with a 308 to https, except ACME
	// challenges, health and metrics (probes and scrapers). Only to a host
	// the node serves (httpsHost).
	RedirectHTTP bool
	// Names are the host names the node holds certificates for besides
	// the registered domains (--acme-domains), lower case.
	Names []string
	// HSTS adds Strict-Transport-Security to HTTPS answers.
	HSTS bool
	// Certificates lists the served certificates' names and ends, for
	// /health and /metrics.
	Certificates func() []CertificateInfo
}

// CertificateInfo is a served certificate as health and metrics show it.
type CertificateInfo struct {
	Name     string
	NotAfter time.Time
}

// NewTLSConfig is the public listener's TLS configuration: TLS 1.2 and
// up; for 1.2 only forward-secret AEAD suites (1.3's are all such);
// certificates from get.
func NewTLSConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		CipherSuites: []uint16{
			tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
		},
		// fasthttp speaks HTTP/1.1 only; acme-tls/1 is a CA's TLS-ALPN-01
		// validation, which the certificates (get) answer.
		NextProtos:     []string{"http/1.1", certs.ACMETLSProto},
		GetCertificate: get,
	}
}

// certificateExpiring is how close to its end a certificate makes
// /health say so.
const certificateExpiring = 7 * 24 * time.Hour

// hstsValue asks browsers to use HTTPS for a year.
const hstsValue = "max-age=31536000"

// ServeTLS accepts HTTPS connections on ln until Shutdown.
func (s *Server) ServeTLS(ln net.Listener) error {
	return s.srv.Serve(tls.NewListener(s.listener(ln), s.cfg.TLS.Config))
}

// upgradeToHTTPS answers a plain HTTP request with a 308 to the same
// path and query over HTTPS, and reports whether it did. ACME
// challenges, health and metrics stay on plain HTTP: the CA validates
// there, and probes and scrapers need no certificate. The redirect names
// a host the node serves (httpsHost), never whatever the Host header
// said: a forged Host must not make the node send people elsewhere.
func (s *Server) upgradeToHTTPS(ctx *fasthttp.RequestCtx) bool {
	if ctx.IsTLS() || !s.cfg.TLS.RedirectHTTP {
		return false
	}
	path := string(ctx.Path())
	if strings.HasPrefix(path, acmeChallengePrefix) || path == "/health" || path == "/health/live" || path == "/health/writes" || path == "/metrics" {
		return false
	}
	host, ok := s.httpsHost(ctx.Host())
	if !ok {
		writeProblem(ctx, fasthttp.StatusMisdirectedRequest, "this node serves no such host over HTTPS")
		return true
	}
	switch {
	case s.cfg.TLS.Port != "" && s.cfg.TLS.Port != "443":
		host = net.JoinHostPort(host, s.cfg.TLS.Port)
	case strings.Contains(host, ":"): // an IPv6 literal
		host = "[" + host + "]"
	}
	ctx.Redirect("https://"+host+string(ctx.RequestURI()), fasthttp.StatusPermanentRedirect)
	return true
}

// httpsHost is the host a plain HTTP request for requested is sent to over
// HTTPS: requested itself (lower case, without its port) when the node
// serves it — the base URL's host, an ACME name, a registered domain —
// else the base URL's host, the name the operator gave for this service.
// false: no base URL to fall back on; the request gets 421 Misdirected
// Request.
func (s *Server) httpsHost(requested []byte) (string, bool) {
	host := strings.ToLower(string(requested))
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(host, ".")
	base := s.baseHost
	if host != "" && (host == base || slices.Contains(s.cfg.TLS.Names, host)) {
		return host, true
	}
	if _, ok := s.fsm.DomainOfHost([]byte(host)); ok && host != "" {
		return host, true
	}
	return base, base != ""
}

// baseHost is the host of a base URL (lower case, without its port), ""
// when there is none.
func baseHost(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// acmeChallengePrefix is where an ACME CA asks for HTTP-01 answers.
const acmeChallengePrefix = "/.well-known/acme-challenge/"

// handleACMEChallenge answers an HTTP-01 challenge from the replicated
// state, so the CA may reach any node.
func (s *Server) handleACMEChallenge(ctx *fasthttp.RequestCtx) {
	token, _ := ctx.UserValue("token").(string)
	c, ok := s.fsm.Challenge(token)
	if !ok {
		writeProblem(ctx, fasthttp.StatusNotFound, "no such ACME challenge")
		return
	}
	ctx.SetContentType("text/plain")
	ctx.SetBodyString(c.KeyAuth)
}

// expiringCertificates names the served certificates within
// certificateExpiring of their end.
func expiringCertificates(t *TLS, now time.Time) []string {
	if t == nil || t.Certificates == nil {
		return nil
	}
	var names []string
	for _, c := range t.Certificates() {
		if c.NotAfter.Sub(now) < certificateExpiring {
			names = append(names, c.Name)
		}
	}
	return names
}

// certificateCollector exports each served certificate's end as
// linkraft_certificate_expiry_timestamp_seconds{name}.
type certificateCollector struct {
	list func() []CertificateInfo
	desc *prometheus.Desc
}

func newCertificateCollector(list func() []CertificateInfo) certificateCollector {
	return certificateCollector{list: list, desc: prometheus.NewDesc("linkraft_certificate_expiry_timestamp_seconds",
		"When each served TLS certificate ends (unix seconds), by name.", []string{"name"}, nil)}
}

// Describe is prometheus.Collector's.
func (c certificateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect is prometheus.Collector's.
func (c certificateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, cert := range c.list() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()), cert.Name)
	}
}
