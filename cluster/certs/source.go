package certs

import (
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// Source gives TLS handshakes the certificate for the name asked (SNI):
// the replicated state's, or the one this node kept at its last run
// (held.go) where that is newer, which it is only until the state has
// applied what the kept copy was taken from. A name without one gets
// none: serving never causes an order. Parsed certificates are kept until
// another chain is served for their name.
type Source struct {
	state Certificates
	seal  Sealer
	// names are the configured names, which Ready waits for; fallback, the
	// first, is served to a client that sends no SNI.
	names    []string
	fallback string
	heldFile string
	log      *slog.Logger

	// ready is closed, once, when a handshake for each of names can
	// complete, or when the CA must reach this node's HTTPS port to
	// validate one it cannot serve yet (TLS-ALPN-01).
	ready     chan struct{}
	readyOnce sync.Once

	mu     sync.Mutex
	parsed map[string]parsedCert
	// held is what this node kept at its last run, taken from its state at
	// index heldAt; nil once the state has applied heldAt, from then on
	// the state alone is served.
	held   map[string]fsm.Certificate
	heldAt uint64
	// kept is what the held file holds now; Follow's alone once it runs.
	kept []fsm.Certificate

	// challenges keeps, by name, the TLS-ALPN-01 certificate made for the
	// challenge in flight (challengeCertificate). Its own lock: making one
	// takes a key, which ordinary handshakes must not wait for.
	challengeMu sync.Mutex
	challenges  map[string]challengeCert
}

type parsedCert struct {
	chain string // the chain it was parsed from
	cert  *tls.Certificate
}

// Certificates is what a Source reads of the replicated state.
type Certificates interface {
	Certificate(name string) (fsm.Certificate, bool)
	Certificates() []fsm.Certificate
	Challenge(token string) (fsm.Challenge, bool)
}

// SourceConfig is what a Source serves besides the state's certificates.
type SourceConfig struct {
	// Names are the configured names (--acme-domains), lower case: Ready
	// waits until each can be served. The first is served to a client that
	// sends no SNI.
	Names []string
	// HeldFile, in the node's data dir, keeps the state's certificates for
	// the next start (Follow writes it); "" keeps none.
	HeldFile string
	Logger   *slog.Logger
}

// NewSource serves the certificates of state, whose keys seal opens, and
// those kept in cfg.HeldFile at the last run. An unreadable kept file is
// logged and left: the state's certificates are served once it has them.
func NewSource(state Certificates, seal Sealer, cfg SourceConfig) *Source {
	s := &Source{state: state, seal: seal, names: cfg.Names, heldFile: cfg.HeldFile, log: cfg.Logger,
		ready: make(chan struct{}), parsed: map[string]parsedCert{}, challenges: map[string]challengeCert{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if len(cfg.Names) > 0 {
		s.fallback = cfg.Names[0]
	}
	s.loadHeld()
	s.updateReady()
	return s
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
	return s.certificate(name)
}

// certificate is the certificate served for name: the state's, or the
// held one while that ends later (the state has not applied its renewal
// yet, or not even the first certificate).
func (s *Source) certificate(name string) (*tls.Certificate, error) {
	c, ok := s.state.Certificate(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, held := s.held[name]; held && (!ok || h.NotAfter > c.NotAfter) {
		c, ok = h, true
	}
	if !ok {
		return nil, fmt.Errorf("no certificate for %q", name)
	}
	return s.parse(c)
}

// parse is c ready for a handshake, parsed once per chain. The caller
// holds s.mu.
func (s *Source) parse(c fsm.Certificate) (*tls.Certificate, error) {
	if p, ok := s.parsed[c.Name]; ok && p.chain == c.Chain {
		return p.cert, nil
	}
	der, err := s.seal.Open([]byte(c.Key), []byte("certificate "+c.Name))
	if err != nil {
		return nil, fmt.Errorf("the key of the certificate for %q: %w", c.Name, err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	cert, err := tls.X509KeyPair([]byte(c.Chain), keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the certificate for %q: %w", c.Name, err)
	}
	s.parsed[c.Name] = parsedCert{chain: c.Chain, cert: &cert}
	return &cert, nil
}

// Ready is closed once a handshake for every configured name can
// complete (at once without any), or once the CA must reach this node's
// HTTPS port for one it cannot complete yet: a TLS-ALPN-01 challenge for
// it is in flight. Until then the HTTPS port should not accept
// connections: a handshake would end in a TLS alert, which browsers do
// not retry on the next address, where a refused connection they do.
// Follow notices the state's changes.
func (s *Source) Ready() <-chan struct{} { return s.ready }

// Missing names the configured names a handshake cannot complete for
// now, in order.
func (s *Source) Missing() []string {
	var missing []string
	for _, name := range s.names {
		if _, err := s.certificate(name); err != nil {
			missing = append(missing, name)
		}
	}
	return missing
}

// updateReady closes Ready when it is due.
func (s *Source) updateReady() {
	select {
	case <-s.ready:
		return
	default:
	}
	missing := s.Missing()
	due := len(missing) == 0
	for _, name := range missing {
		if _, validating := s.state.Challenge(fsm.TLSALPNToken(name)); validating {
			due = true
		}
	}
	if due {
		s.readyOnce.Do(func() { close(s.ready) })
	}
}

// Served lists the certificate served for each name that has one, by
// name, for health and metrics.
func (s *Source) Served() []fsm.Certificate {
	list := s.state.Certificates()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) == 0 {
		return list
	}
	byName := make(map[string]fsm.Certificate, len(list)+len(s.held))
	for _, c := range list {
		byName[c.Name] = c
	}
	for name, h := range s.held {
		if c, ok := byName[name]; !ok || h.NotAfter > c.NotAfter {
			byName[name] = h
		}
	}
	return sortedCertificates(byName)
}

func sortedCertificates(byName map[string]fsm.Certificate) []fsm.Certificate {
	list := slices.Collect(maps.Values(byName))
	slices.SortFunc(list, func(a, b fsm.Certificate) int { return strings.Compare(a.Name, b.Name) })
	return list
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
