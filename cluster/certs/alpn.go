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

// challengeCertificate is the certificate a TLS-ALPN-01 validation of
// name gets: made on this node from the challenge in the state (the
// digest of the key authorization), with a key of its own, self-signed.
// None when no such challenge is in flight. It is made afresh for each
// handshake, not kept: a CA makes a few, and only while the challenge is
// in flight.
func (s *Source) challengeCertificate(name string) (*tls.Certificate, error) {
	c, ok := s.state.Challenge(fsm.TLSALPNToken(name))
	if !ok {
		return nil, fmt.Errorf("no TLS-ALPN-01 challenge in flight for %q", name)
	}
	digest, err := hex.DecodeString(c.KeyAuth)
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
	now := time.Now()
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
