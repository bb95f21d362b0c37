package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/certs"
	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
	"github.com/linkraft/linkraft/httpd"
)

// letsEncrypt is the default ACME directory.
const letsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

// tlsFlags are serve's HTTPS flags.
type tlsFlags struct {
	httpsAddr                                         string
	certFile, keyFile                                 string
	acmeEmail, acmeDirectory, acmeCARoot, acmeDomains string
	httpRedirect, hsts                                bool
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.httpsAddr, "https-addr", ":443", "HTTPS listen address, once TLS is configured (--tls-cert and --tls-key, or ACME)")
	fs.StringVar(&t.certFile, "tls-cert", "", "PEM certificate chain to serve over HTTPS (read again when it changes)")
	fs.StringVar(&t.keyFile, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&t.acmeEmail, "acme-email", "", "contact address of the cluster's ACME account")
	fs.StringVar(&t.acmeDirectory, "acme-directory", letsEncrypt, "ACME directory URL of the certificate authority")
	fs.StringVar(&t.acmeCARoot, "acme-ca-root", "", "PEM file of CA certificates to trust for the ACME directory (a private or test CA)")
	fs.StringVar(&t.acmeDomains, "acme-domains", "", "comma-separated names to hold certificates for, ordered from the ACME CA once for the whole cluster "+
		"(every domain registered with /admin/domains gets one too); setting it, or --acme-email, turns ACME on")
	fs.BoolVar(&t.httpRedirect, "http-redirect", true, "with TLS on, answer plain HTTP with a 308 to https (but ACME challenges, health and metrics)")
	fs.BoolVar(&t.hsts, "hsts", false, "add Strict-Transport-Security to HTTPS answers")
}

func (t *tlsFlags) acme() bool    { return t.acmeDomains != "" || t.acmeEmail != "" }
func (t *tlsFlags) files() bool   { return t.certFile != "" || t.keyFile != "" }
func (t *tlsFlags) enabled() bool { return t.acme() || t.files() }

func (t *tlsFlags) validate() error {
	switch {
	case t.files() && (t.certFile == "" || t.keyFile == ""):
		return errors.New("--tls-cert and --tls-key go together")
	case t.files() && t.acme():
		return errors.New("--tls-cert/--tls-key and ACME (--acme-domains, --acme-email) exclude each other")
	case t.acme() && !strings.HasPrefix(t.acmeDirectory, "https://"):
		return errors.New("--acme-directory must be an https URL")
	}
	for _, name := range splitList(t.acmeDomains) {
		if _, err := input.Domain(name); err != nil {
			return fmt.Errorf("--acme-domains: %w", err)
		}
	}
	return nil
}

// acmeConfig is the cluster's ACME configuration, nil when ACME is off.
func (t *tlsFlags) acmeConfig() (*cluster.ACMEConfig, error) {
	if !t.acme() {
		return nil, nil
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if t.acmeCARoot != "" {
		pem, err := os.ReadFile(t.acmeCARoot)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca-root: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--acme-ca-root: no PEM certificate in %s", t.acmeCARoot)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	var names []string
	for _, n := range splitList(t.acmeDomains) {
		names = append(names, strings.ToLower(n))
	}
	return &cluster.ACMEConfig{Config: certs.Config{Directory: t.acmeDirectory, Email: t.acmeEmail, HTTPClient: client}, Names: names}, nil
}

// serverTLS is how httpd serves HTTPS: the certificates of the
// replicated state (ACME) or of the files.
func (t *tlsFlags) serverTLS(state *fsm.FSM, key *secure.Key) (*httpd.TLS, error) {
	_, port, err := net.SplitHostPort(t.httpsAddr)
	if err != nil {
		return nil, fmt.Errorf("--https-addr: %w", err)
	}
	out := &httpd.TLS{Port: port, RedirectHTTP: t.httpRedirect, HSTS: t.hsts}
	if t.files() {
		files, err := certs.NewFileSource(t.certFile, t.keyFile)
		if err != nil {
			return nil, err
		}
		out.Config = httpd.NewTLSConfig(files.GetCertificate)
		out.Certificates = func() []httpd.CertificateInfo {
			name, end := files.Leaf()
			return []httpd.CertificateInfo{{Name: name, NotAfter: end}}
		}
		return out, nil
	}
	fallback := ""
	if names := splitList(t.acmeDomains); len(names) > 0 {
		fallback = strings.ToLower(names[0])
	}
	out.Config = httpd.NewTLSConfig(certs.NewSource(state, key, fallback).GetCertificate)
	out.Certificates = func() []httpd.CertificateInfo {
		var list []httpd.CertificateInfo
		for _, c := range state.Certificates() {
			list = append(list, httpd.CertificateInfo{Name: c.Name, NotAfter: time.UnixMilli(c.NotAfter)})
		}
		return list
	}
	return out, nil
}

// httpsBase is the short URLs' prefix when TLS is on and --base-url is
// not set: the first ACME name, else the advertised host on the HTTPS
// port.
func (t *tlsFlags) httpsBase(advertised string) string {
	if names := splitList(t.acmeDomains); len(names) > 0 {
		return "https://" + strings.ToLower(names[0])
	}
	host, _, err := net.SplitHostPort(advertised)
	if err != nil {
		host = advertised
	}
	if _, port, err := net.SplitHostPort(t.httpsAddr); err == nil && port != "443" {
		host = net.JoinHostPort(host, port)
	}
	return "https://" + host
}
