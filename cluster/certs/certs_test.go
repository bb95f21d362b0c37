package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
)

// selfSigned is a certificate for names on key, valid from from to to.
func selfSigned(t *testing.T, key crypto.Signer, from, to time.Time, names ...string) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: from, NotAfter: to}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func newSealer(t *testing.T) *secure.Key {
	t.Helper()
	k, err := secure.ParseKey(secure.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCertificateOf: only a chain whose leaf is for the name and the key
// ordered with is stored.
func TestCertificateOf(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	cases := []struct {
		name string
		der  [][]byte
		ok   bool
	}{
		{"the name, the key", [][]byte{selfSigned(t, key, now, now.Add(time.Hour), "s.example")}, true},
		{"another name", [][]byte{selfSigned(t, key, now, now.Add(time.Hour), "evil.example")}, false},
		{"another key", [][]byte{selfSigned(t, other, now, now.Add(time.Hour), "s.example")}, false},
		{"nothing", nil, false},
		{"not a certificate", [][]byte{[]byte("junk")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := certificateOf("s.example", tc.der, key, "sealed")
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if tc.ok && (c.Name != "s.example" || c.Key != "sealed" || c.NotAfter-c.NotBefore != time.Hour.Milliseconds()) {
				t.Fatalf("stored %+v", c)
			}
		})
	}
}

type fakeState struct {
	certs      map[string]fsm.Certificate
	challenges map[string]fsm.Challenge
	raised     int
}

func (f fakeState) ACMEAccount() (fsm.ACMEAccount, bool) { return fsm.ACMEAccount{}, false }
func (f fakeState) Certificate(name string) (fsm.Certificate, bool) {
	c, ok := f.certs[name]
	return c, ok
}
func (f fakeState) Challenge(token string) (fsm.Challenge, bool) {
	c, ok := f.challenges[token]
	return c, ok
}
func (f fakeState) Certificates() []fsm.Certificate { return sortedCertificates(f.certs) }
func (f fakeState) Orders() []fsm.Order             { return nil }
func (f fakeState) Challenges() []fsm.Challenge     { return nil }
func (f fakeState) Raised() int                     { return f.raised }

// TestDue: a name is ordered when it has no certificate or a third of
// its lifetime is left, and not while a backoff holds it back; the
// backoff doubles and honours the CA's Retry-After.
func TestDue(t *testing.T) {
	now := time.Now()
	state := fakeState{certs: map[string]fsm.Certificate{
		"fresh.example": {NotBefore: now.Add(-time.Hour).UnixMilli(), NotAfter: now.Add(89 * 24 * time.Hour).UnixMilli()},
		"old.example":   {NotBefore: now.Add(-61 * 24 * time.Hour).UnixMilli(), NotAfter: now.Add(29 * 24 * time.Hour).UnixMilli()},
	}}
	m := NewManager(Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, state, nil, nil)
	m.now = func() time.Time { return now }
	for name, want := range map[string]bool{"fresh.example": false, "old.example": true, "new.example": true} {
		if got := m.due(name, now); got != want {
			t.Errorf("due(%s) = %v, want %v", name, got, want)
		}
	}
	m.failed("new.example", errors.New("CA down"))
	if m.due("new.example", now.Add(59*time.Second)) || !m.due("new.example", now.Add(61*time.Second)) {
		t.Fatal("a first failure holds the name back for a minute")
	}
	m.failed("new.example", errors.New("CA down"))
	if m.due("new.example", now.Add(119*time.Second)) {
		t.Fatal("a second failure holds the name back for two minutes")
	}
	m.failed("limited.example", &acme.Error{StatusCode: 429, ProblemType: "urn:ietf:params:acme:error:rateLimited", Header: map[string][]string{"Retry-After": {"3600"}}})
	if m.due("limited.example", now.Add(59*time.Minute)) {
		t.Fatal("a rate limit's Retry-After is not honoured")
	}
}

// TestSourceServesTheStoredCertificate: a handshake for a stored name
// gets its certificate (parsed once while the state holds it); one for
// an unknown name, or whose key was sealed with another cluster key,
// gets none; no SNI gets the fallback name's.
func TestSourceServesTheStoredCertificate(t *testing.T) {
	seal := newSealer(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	cert, err := certificateOf("s.example", [][]byte{selfSigned(t, key, now, now.Add(time.Hour), "s.example")}, key,
		string(seal.Seal(der, []byte("certificate s.example"))))
	if err != nil {
		t.Fatal(err)
	}
	foreign := cert
	foreign.Name = "foreign.example"
	state := fakeState{certs: map[string]fsm.Certificate{"s.example": cert, "foreign.example": foreign}}
	src := NewSource(state, seal, SourceConfig{Names: []string{"s.example"}})
	for name, ok := range map[string]bool{"s.example": true, "S.Example.": true, "": true, "unknown.example": false, "foreign.example": false} {
		got, err := src.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
		if (err == nil) != ok || ok && got.Leaf.DNSNames[0] != "s.example" {
			t.Errorf("%q: %v, %v; want served %v", name, got, err, ok)
		}
	}
	a, _ := src.GetCertificate(&tls.ClientHelloInfo{ServerName: "s.example"})
	b, _ := src.GetCertificate(&tls.ClientHelloInfo{ServerName: "s.example"})
	if a != b {
		t.Fatal("the certificate is parsed again for every handshake")
	}
}

// TestFileSourceReloads: a changed pair is served from the next check on;
// a broken one keeps the last good pair served.
func TestFileSourceReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func(name string, at time.Time) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		der, _ := x509.MarshalPKCS8PrivateKey(key)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: selfSigned(t, key, at, at.Add(time.Hour), name)})
		for file, data := range map[string][]byte{certFile: certPEM, keyFile: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})} {
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(file, at, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	served := func(f *FileSource) string {
		f.mu.Lock()
		f.checked = time.Time{} // check the files at once
		f.mu.Unlock()
		c, _ := f.GetCertificate(nil)
		return c.Leaf.DNSNames[0]
	}
	start := time.Now().Add(-time.Hour)
	write("one.example", start)
	f, err := NewFileSource(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := served(f); got != "one.example" {
		t.Fatalf("served %s", got)
	}
	write("two.example", start.Add(time.Minute))
	if got := served(f); got != "two.example" {
		t.Fatalf("after a change: served %s, want two.example", got)
	}
	if err := os.WriteFile(certFile, []byte("broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := served(f); got != "two.example" {
		t.Fatalf("after a broken change: served %s, want the last good pair", got)
	}
	if _, err := NewFileSource(certFile, keyFile); err == nil {
		t.Fatal("a broken pair at the start is accepted")
	}
}
