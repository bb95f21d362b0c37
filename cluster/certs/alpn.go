package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"math/big"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/linkraft/linkraft/fsm"
)

// ACMETLSProto is the ALPN protocol a CA validating TLS-ALPN-01 offers
// alone (RFC 8737): the listener must be able to negotiate it.
const ACMETLSProto = "acme-tls/1"

// idPeACMEIdentifier is the certificate extension that carries the
// SHA-256 of the key authorization (RFC 8737, 3).
var idPeACMEIdentifier = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 31}

// challengeLifetime is the validity of a TLS-ALPN-01 certificate: only
// the CA ever sees it, for the minutes of a validation.
const challengeLifetime = 24 * time.Hour

// challengeCert is the TLS-ALPN-01 certificate made for one challenge.
type challengeCert struct {
	keyAuth string    // the digest of the challenge it was made for
	made    time.Time // reused only while well inside its lifetime
	cert    *tls.Certificate
}

// challengeCertificate is the certificate a TLS-ALPN-01 validation of
// name gets: made on this node from the challenge in the state (the
// digest of the key authorization), with a key of its own, self-signed.
// None when no such challenge is in flight. It is made once per challenge
// and kept while the state holds that challenge: any client may offer
// acme-tls/1, and a key and a signature made for each handshake would let
// a flood of them spend the node's CPU. A CA validating from several
// places gets the same certificate, which RFC 8737 allows: it checks the
// name and the digest, not the key.
func (s *Source) challengeCertificate(name string) (*tls.Certificate, error) {
	c, inFlight := s.state.Challenge(fsm.TLSALPNToken(name))
	s.challengeMu.Lock()
	defer s.challengeMu.Unlock()
	if !inFlight {
		delete(s.challenges, name)
		return nil, fmt.Errorf("no TLS-ALPN-01 challenge in flight for %q", name)
	}
	now := time.Now()
	if k, ok := s.challenges[name]; ok && k.keyAuth == c.KeyAuth && now.Sub(k.made) < challengeLifetime/2 {
		return k.cert, nil
	}
	cert, err := newChallengeCertificate(name, c.KeyAuth, now)
	if err != nil {
		return nil, err
	}
	// Those kept are only the challenges still in the state: a new
	// certificate costs far more than this look at each.
	for kept, k := range s.challenges {
		if c, ok := s.state.Challenge(fsm.TLSALPNToken(kept)); !ok || c.KeyAuth != k.keyAuth {
			delete(s.challenges, kept)
		}
	}
	s.challenges[name] = challengeCert{keyAuth: c.KeyAuth, made: now, cert: cert}
	return cert, nil
}

// newChallengeCertificate makes the TLS-ALPN-01 certificate of name for
// the key authorization's digest keyAuth (hex), valid from now.
func newChallengeCertificate(name, keyAuth string, now time.Time) (*tls.Certificate, error) {
	digest, err := hex.DecodeString(keyAuth)
	if err != nil {
		return nil, fmt.Errorf("the TLS-ALPN-01 challenge for %q: %w", name, err)
	}
	value, err := asn1.Marshal(digest) // an OCTET STRING
	if err != nil {
		return nil, fmt.Errorf("the TLS-ALPN-01 challenge for %q: %w", name, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("a key for the TLS-ALPN-01 certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("a serial for the TLS-ALPN-01 certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(challengeLifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		ExtraExtensions:       []pkix.Extension{{Id: idPeACMEIdentifier, Critical: true, Value: value}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("the TLS-ALPN-01 certificate for %q: %w", name, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// challengeOf is the challenge of an authorization the leader answers, as
// the state keeps it: HTTP-01 when the CA offers it (any node answers it
// on plain HTTP), else TLS-ALPN-01 once the cluster is raised to
// fsm.LevelVisitRows (older builds would not answer its handshake).
func (m *Manager) challengeOf(client *acme.Client, z *acme.Authorization) (*acme.Challenge, fsm.Challenge, error) {
	var alpn *acme.Challenge
	for _, c := range z.Challenges {
		switch c.Type {
		case "http-01":
			keyAuth, err := client.HTTP01ChallengeResponse(c.Token)
			return c, fsm.Challenge{Token: c.Token, KeyAuth: keyAuth}, err
		case "tls-alpn-01":
			alpn = c
		}
	}
	name := z.Identifier.Value
	switch {
	case alpn == nil:
		return nil, fsm.Challenge{}, fmt.Errorf("the CA offers neither http-01 nor tls-alpn-01 for %s", name)
	case m.state.Raised() < fsm.LevelVisitRows:
		return nil, fsm.Challenge{}, fmt.Errorf("the CA offers only tls-alpn-01 for %s, which needs the cluster raised to level %d", name, fsm.LevelVisitRows)
	}
	// The key authorization is the same for every challenge type (RFC 8555,
	// 8.1); the acme package names its function after HTTP-01.
	keyAuth, err := client.HTTP01ChallengeResponse(alpn.Token)
	if err != nil {
		return nil, fsm.Challenge{}, err
	}
	digest := sha256.Sum256([]byte(keyAuth))
	return alpn, fsm.Challenge{Token: fsm.TLSALPNToken(name), KeyAuth: hex.EncodeToString(digest[:])}, nil
}
