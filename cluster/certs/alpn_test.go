package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"net"
	"testing"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/linkraft/linkraft/fsm"
)

// handshake runs a TLS handshake for name against src, the client
// offering protos, and returns what the client saw.
func handshake(t *testing.T, src *Source, name string, protos ...string) (tls.ConnectionState, error) {
	t.Helper()
	server, client := net.Pipe()
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	server.SetDeadline(deadline)
	client.SetDeadline(deadline)
	go func() {
		defer server.Close()
		_ = tls.Server(server, &tls.Config{GetCertificate: src.GetCertificate, NextProtos: []string{"http/1.1", ACMETLSProto}}).Handshake()
	}()
	// A CA checks the certificate itself (RFC 8737, 3), as below.
	c := tls.Client(client, &tls.Config{ServerName: name, NextProtos: protos, InsecureSkipVerify: true})
	err := c.Handshake()
	return c.ConnectionState(), err
}

// TestSourceAnswersTLSALPN: a handshake offering acme-tls/1 for a name
// with a TLS-ALPN-01 challenge in flight gets a certificate for that name
// alone, carrying the digest in the critical acmeIdentifier extension;
// one for a name without a challenge gets none; an ordinary handshake
// for the same name still gets the stored certificate.
func TestSourceAnswersTLSALPN(t *testing.T) {
	seal := newSealer(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	stored, err := certificateOf("s.example", [][]byte{selfSigned(t, key, now, now.Add(time.Hour), "s.example")}, key,
		string(seal.Seal(der, []byte("certificate s.example"))))
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("token.thumbprint"))
	state := fakeState{certs: map[string]fsm.Certificate{"s.example": stored}, challenges: map[string]fsm.Challenge{
		fsm.TLSALPNToken("s.example"): {Token: fsm.TLSALPNToken("s.example"), KeyAuth: hex.EncodeToString(digest[:])},
	}}
	src := NewSource(state, seal, SourceConfig{Names: []string{"s.example"}})

	cs, err := handshake(t, src, "s.example", ACMETLSProto)
	if err != nil {
		t.Fatalf("validation handshake: %v", err)
	}
	leaf := cs.PeerCertificates[0]
	if cs.NegotiatedProtocol != ACMETLSProto || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "s.example" {
		t.Fatalf("negotiated %q, names %v", cs.NegotiatedProtocol, leaf.DNSNames)
	}
	found := false
	for _, ext := range leaf.Extensions {
		if ext.Id.Equal(idPeACMEIdentifier) {
			var got []byte
			rest, err := asn1.Unmarshal(ext.Value, &got)
			found = ext.Critical && err == nil && len(rest) == 0 && bytes.Equal(got, digest[:])
		}
	}
	if !found {
		t.Fatal("no critical acmeIdentifier extension with the key authorization's digest")
	}

	if _, err := handshake(t, src, "other.example", ACMETLSProto); err == nil {
		t.Fatal("a validation handshake for a name without a challenge succeeded")
	}
	cs, err = handshake(t, src, "s.example", "http/1.1")
	if err != nil || !cs.PeerCertificates[0].Equal(leafOf(t, stored.Chain)) {
		t.Fatalf("an ordinary handshake did not get the stored certificate: %v", err)
	}
}

// TestSourceKeepsTLSALPNCertificate: every validation handshake for the
// challenge in flight gets the one certificate made for it, so a client
// repeating them costs no key nor signature; a changed challenge gets a
// new certificate carrying its own digest; once the state no longer holds
// a challenge its certificate is neither served nor kept.
func TestSourceKeepsTLSALPNCertificate(t *testing.T) {
	challenge := func(name, keyAuth string) fsm.Challenge {
		digest := sha256.Sum256([]byte(keyAuth))
		return fsm.Challenge{Token: fsm.TLSALPNToken(name), KeyAuth: hex.EncodeToString(digest[:])}
	}
	state := fakeState{challenges: map[string]fsm.Challenge{
		fsm.TLSALPNToken("a.example"): challenge("a.example", "one.thumbprint"),
		fsm.TLSALPNToken("b.example"): challenge("b.example", "one.thumbprint"),
	}}
	src := NewSource(state, newSealer(t), SourceConfig{Names: []string{"a.example"}})
	leaf := func(name string) *x509.Certificate {
		t.Helper()
		cs, err := handshake(t, src, name, ACMETLSProto)
		if err != nil {
			t.Fatalf("validation handshake for %s: %v", name, err)
		}
		return cs.PeerCertificates[0]
	}
	digestOf := func(c *x509.Certificate) []byte {
		for _, ext := range c.Extensions {
			if ext.Id.Equal(idPeACMEIdentifier) {
				var got []byte
				if _, err := asn1.Unmarshal(ext.Value, &got); err == nil {
					return got
				}
			}
		}
		return nil
	}

	first := leaf("a.example")
	if again := leaf("a.example"); !bytes.Equal(again.Raw, first.Raw) {
		t.Fatal("a second handshake for the same challenge got another certificate")
	}
	if other := leaf("b.example"); bytes.Equal(other.Raw, first.Raw) || other.DNSNames[0] != "b.example" {
		t.Fatalf("another name's challenge got %v", other.DNSNames)
	}

	state.challenges[fsm.TLSALPNToken("a.example")] = challenge("a.example", "two.thumbprint")
	changed := leaf("a.example")
	want, _ := hex.DecodeString(state.challenges[fsm.TLSALPNToken("a.example")].KeyAuth)
	if bytes.Equal(changed.Raw, first.Raw) || !bytes.Equal(digestOf(changed), want) {
		t.Fatal("a changed challenge did not get a new certificate with its digest")
	}

	delete(state.challenges, fsm.TLSALPNToken("b.example"))
	if _, err := handshake(t, src, "b.example", ACMETLSProto); err == nil {
		t.Fatal("a validation handshake succeeded after its challenge left the state")
	}
	if len(src.challenges) != 1 {
		t.Fatalf("%d certificates kept for 1 challenge in flight", len(src.challenges))
	}
}

// leafOf is the first certificate of a PEM chain.
func leafOf(t *testing.T, chainPEM string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(chainPEM))
	if block == nil {
		t.Fatal("no PEM block in the chain")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChallengeOf: the leader answers HTTP-01 when the CA offers it, and
// TLS-ALPN-01 when that is all it offers and the cluster is raised to
// LevelVisitRows; the state gets the name and the key authorization's
// digest, nothing of the account key.
func TestChallengeOf(t *testing.T) {
	accountKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	client := &acme.Client{Key: accountKey}
	keyAuth, err := client.HTTP01ChallengeResponse("tok")
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte(keyAuth))
	http01 := &acme.Challenge{Type: "http-01", Token: "tok"}
	alpn := &acme.Challenge{Type: "tls-alpn-01", Token: "tok"}
	dns := &acme.Challenge{Type: "dns-01", Token: "tok"}
	cases := []struct {
		name    string
		offered []*acme.Challenge
		raised  int
		want    fsm.Challenge // zero: refused
	}{
		{"HTTP-01 first", []*acme.Challenge{alpn, http01}, fsm.LevelVisitRows, fsm.Challenge{Token: "tok", KeyAuth: keyAuth}},
		{"TLS-ALPN-01 when alone", []*acme.Challenge{dns, alpn}, fsm.LevelVisitRows,
			fsm.Challenge{Token: fsm.TLSALPNToken("s.example"), KeyAuth: hex.EncodeToString(digest[:])}},
		{"TLS-ALPN-01 alone, below level 9", []*acme.Challenge{alpn}, fsm.LevelCerts, fsm.Challenge{}},
		{"neither", []*acme.Challenge{dns}, fsm.LevelVisitRows, fsm.Challenge{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager(Config{}, fakeState{raised: tc.raised}, nil, nil)
			z := &acme.Authorization{Identifier: acme.AuthzID{Type: "dns", Value: "s.example"}, Challenges: tc.offered}
			_, got, err := m.challengeOf(client, z)
			if (err == nil) != (tc.want != fsm.Challenge{}) || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
