package certs

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// Source gives TLS handshakes the certificate the replicated state holds
// for the name asked (SNI). A name without one gets none: serving never
// causes an order. Parsed certificates are kept until the state holds
// another for their name.
type Source struct {
	state Certificates
	seal  Sealer
	// fallback is the name served to a client that sends no SNI.
	fallback string

	mu     sync.Mutex
	parsed map[string]parsedCert
	// challenges keeps, by name, the TLS-ALPN-01 certificate made for the
	// challenge in flight (challengeCertificate). Its own lock: making one
	// takes a key, which ordinary handshakes must not wait for.
	challengeMu sync.Mutex
	challenges  map[string]challengeCert
}

type parsedCert struct {
	chain string // the state's chain it was parsed from
	cert  *tls.Certificate
}

// Certificates is what a Source reads of the replicated state.
type Certificates interface {
	Certificate(name string) (fsm.Certificate, bool)
	Challenge(token string) (fsm.Challenge, bool)
}

// NewSource serves the certificates of state; a handshake without a name
// gets fallback's.
func NewSource(state Certificates, seal Sealer, fallback string) *Source {
	return &Source{state: state, seal: seal, fallback: fallback, parsed: map[string]parsedCert{}, challenges: map[string]challengeCert{}}
}

// GetCertificate is tls.Config.GetCertificate. A CA's TLS-ALPN-01
// validation (ALPN acme-tls/1) gets the challenge's certificate.
func (s *Source) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
	if name == "" {
		name = s.fallback
	}
	if slices.Contains(hello.SupportedProtos, ACMETLSProto) {
		return s.challengeCertificate(name)
	}
	c, ok := s.state.Certificate(name)
	if !ok {
		return nil, fmt.Errorf("no certificate for %q", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.parsed[name]; ok && p.chain == c.Chain {
		return p.cert, nil
	}
	der, err := s.seal.Open([]byte(c.Key), []byte("certificate "+name))
	if err != nil {
		return nil, fmt.Errorf("the key of the certificate for %q: %w", name, err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	cert, err := tls.X509KeyPair([]byte(c.Chain), keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the certificate for %q: %w", name, err)
	}
	s.parsed[name] = parsedCert{chain: c.Chain, cert: &cert}
	return &cert, nil
}

// FileSource serves a certificate and key from files an operator
// manages, read again when either file changes (checked at most once a
// second, on a handshake).
type FileSource struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]time.Time // the files' modification times when read
	checked time.Time
}

// NewFileSource reads the pair once, so a bad one fails the start.
func NewFileSource(certFile, keyFile string) (*FileSource, error) {
	f := &FileSource{certFile: certFile, keyFile: keyFile}
	if err := f.reload(time.Now()); err != nil {
		return nil, err
	}
	return f, nil
}

// GetCertificate is tls.Config.GetCertificate. A pair that fails to load
// after a change keeps the last good one served.
func (f *FileSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.checked) >= time.Second {
		_ = f.reload(now)
	}
	return f.cert, nil
}

// Leaf is the served certificate's name and end, for health and metrics.
func (f *FileSource) Leaf() (name string, notAfter time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if leaf := f.cert.Leaf; leaf != nil {
		name = leaf.Subject.CommonName
		if len(leaf.DNSNames) > 0 {
			name = leaf.DNSNames[0]
		}
		return name, leaf.NotAfter
	}
	return "", time.Time{}
}

// reload reads the pair if either file changed since it was read. The
// caller holds f.mu, or f is not shared yet.
func (f *FileSource) reload(now time.Time) error {
	f.checked = now
	var stamp [2]time.Time
	for i, name := range []string{f.certFile, f.keyFile} {
		st, err := os.Stat(name)
		if err != nil {
			return fmt.Errorf("tls file: %w", err)
		}
		stamp[i] = st.ModTime()
	}
	if f.cert != nil && stamp == f.stamp {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("tls certificate and key: %w", err)
	}
	f.cert, f.stamp = &cert, stamp
	return nil
}
