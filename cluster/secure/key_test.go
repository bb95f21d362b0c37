package secure

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// newTestKey returns a fresh random key and its base64 form.
func newTestKey(t *testing.T) (*Key, string) {
	t.Helper()
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	s := base64.StdEncoding.EncodeToString(raw)
	k, err := ParseKey(s)
	if err != nil {
		t.Fatalf("ParseKey: %v", err)
	}
	return k, s
}

func TestParseKey(t *testing.T) {
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n)) }
	tests := []struct {
		name    string
		in      string
		wantErr string // substring; "" means success
	}{
		{"valid", b64(32), ""},
		{"valid with trailing newline", b64(32) + "\n", ""},
		{"not base64", "this is !!! not base64 at all ###############", "not standard base64"},
		{"url-safe alphabet", strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32))), "not standard base64"},
		{"16 bytes", b64(16), "decodes to 16 bytes, want 32"},
		{"33 bytes", b64(33), "decodes to 33 bytes, want 32"},
		{"empty", "", "empty"},
		{"whitespace only", "  \n", "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseKey(tt.in)
			if tt.wantErr == "" {
				if err != nil || k == nil {
					t.Fatalf("ParseKey = %v, %v; want a key", k, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseKey succeeded; want error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
			if k != nil {
				t.Fatalf("key returned alongside error")
			}
		})
	}
}

func TestParseKeyErrorDoesNotEchoKey(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, 31))
	_, err := ParseKey(secret)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("error %v leaks the key or is nil", err)
	}
}

func TestGossipKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0x42}, KeySize)
	s := base64.StdEncoding.EncodeToString(raw)
	k1, err := ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	g := k1.GossipKey()
	if len(g) != 32 {
		t.Fatalf("GossipKey length %d, want 32", len(g))
	}
	if !bytes.Equal(g, k2.GossipKey()) {
		t.Fatal("GossipKey is not deterministic")
	}
	if bytes.Equal(g, raw) {
		t.Fatal("GossipKey equals the raw cluster key")
	}
	g[0] ^= 0xff
	if bytes.Equal(g, k1.GossipKey()) {
		t.Fatal("GossipKey returns shared memory")
	}
	other, _ := newTestKey(t)
	if bytes.Equal(k1.GossipKey(), other.GossipKey()) {
		t.Fatal("different cluster keys give the same gossip key")
	}
}

// TestBackupMAC: a backup's MAC is keyed with its own subkey, HKDF of the
// cluster key under "linkraft backup": the same for every holder of the
// key and across releases (a backup made today must restore later),
// another for another key, and never the raw key or the gossip key.
func TestBackupMAC(t *testing.T) {
	raw := bytes.Repeat([]byte{0x42}, KeySize)
	k, err := ParseKey(base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("LKRB a backup")
	sum := func(key []byte) []byte {
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		return m.Sum(nil)
	}
	subkey, err := hkdf.Key(sha256.New, raw, nil, "linkraft backup", 32)
	if err != nil {
		t.Fatal(err)
	}
	mac := k.BackupMAC()
	mac.Write(msg)
	got := mac.Sum(nil)
	if !bytes.Equal(got, sum(subkey)) {
		t.Fatal("the backup MAC is not HMAC-SHA256 under HKDF(cluster key, \"linkraft backup\"): backups made before would no longer restore")
	}
	if bytes.Equal(got, sum(raw)) || bytes.Equal(got, sum(k.GossipKey())) {
		t.Fatal("the backup MAC is keyed with the raw cluster key or the gossip key")
	}
	other, _ := newTestKey(t)
	m := other.BackupMAC()
	m.Write(msg)
	if bytes.Equal(got, m.Sum(nil)) {
		t.Fatal("two cluster keys give the same backup MAC")
	}
}

// TestSignatureToken: a key's signature token is the same on every node
// of a cluster (it depends on the cluster key, the key's id and its hash
// alone), differs for another key, hash or cluster, and is 32 hex digits.
func TestSignatureToken(t *testing.T) {
	raw := bytes.Repeat([]byte{0x42}, KeySize)
	k, err := ParseKey(base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseKey(base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := newTestKey(t)
	hash := bytes.Repeat([]byte{7}, 32)
	token := k.SignatureToken("k1", hash)
	if len(token) != 32 || strings.Trim(token, "0123456789abcdef") != "" {
		t.Fatalf("token %q is not 32 hex digits", token)
	}
	for _, tt := range []struct {
		name  string
		token string
		same  bool
	}{
		{"another node of the cluster", again.SignatureToken("k1", hash), true},
		{"another key id", k.SignatureToken("k2", hash), false},
		{"another hash (a new key)", k.SignatureToken("k1", bytes.Repeat([]byte{8}, 32)), false},
		{"another cluster", other.SignatureToken("k1", hash), false},
		{"the id's last byte moved into the hash", k.SignatureToken("k", append([]byte("1"), hash...)), false},
	} {
		if (tt.token == token) != tt.same {
			t.Errorf("%s: token %q, the key's %q: same = %v, want %v", tt.name, tt.token, token, !tt.same, tt.same)
		}
	}
}

func TestCertificateDeterministic(t *testing.T) {
	_, s := newTestKey(t)
	k1, err := ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := k1.TLSConfig().Certificates[0], k2.TLSConfig().Certificates[0]
	if !bytes.Equal(c1.Certificate[0], c2.Certificate[0]) {
		t.Fatal("same key produced different certificates")
	}
	if c1.Leaf.Subject.CommonName != "linkraft" {
		t.Fatalf("CommonName %q", c1.Leaf.Subject.CommonName)
	}
	other, _ := newTestKey(t)
	if bytes.Equal(c1.Certificate[0], other.TLSConfig().Certificates[0].Certificate[0]) {
		t.Fatal("different keys produced the same certificate")
	}
	// The peer check accepts our own certificate and rejects the other one.
	if err := k1.TLSConfig().VerifyPeerCertificate(c2.Certificate, nil); err != nil {
		t.Fatalf("own certificate rejected: %v", err)
	}
	if err := k1.TLSConfig().VerifyPeerCertificate(other.TLSConfig().Certificates[0].Certificate, nil); err == nil {
		t.Fatal("foreign certificate accepted")
	}
	if err := k1.TLSConfig().VerifyPeerCertificate(nil, nil); err == nil {
		t.Fatal("empty certificate list accepted")
	}
	if err := k1.TLSConfig().VerifyPeerCertificate([][]byte{c1.Certificate[0], c1.Certificate[0]}, nil); err == nil {
		t.Fatal("two certificates accepted")
	}
	if err := k1.TLSConfig().VerifyPeerCertificate([][]byte{[]byte("garbage")}, nil); err == nil {
		t.Fatal("garbage certificate accepted")
	}
}

func TestKeyRedacted(t *testing.T) {
	k, s := newTestKey(t)
	for _, out := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(out, s) || !strings.Contains(out, "redacted") {
			t.Fatalf("formatted key %q is not redacted", out)
		}
	}
}

// TestSealOpens: a sealed secret opens with the same key and aad only.
func TestSealOpens(t *testing.T) {
	a, err := ParseKey(GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseKey(GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	sealed := a.Seal([]byte("private key"), []byte("s.example"))
	if got, err := a.Open(sealed, []byte("s.example")); err != nil || string(got) != "private key" {
		t.Fatalf("open: %q, %v", got, err)
	}
	changed := append([]byte(nil), sealed...)
	changed[len(changed)-1] ^= 1
	for name, open := range map[string]func() ([]byte, error){
		"another cluster key": func() ([]byte, error) { return b.Open(sealed, []byte("s.example")) },
		"another name":        func() ([]byte, error) { return a.Open(sealed, []byte("other.example")) },
		"a changed byte":      func() ([]byte, error) { return a.Open(changed, []byte("s.example")) },
		"too short":           func() ([]byte, error) { return a.Open(sealed[:5], []byte("s.example")) },
	} {
		if got, err := open(); !errors.Is(err, ErrSealed) || got != nil {
			t.Errorf("%s: %q, %v; want ErrSealed", name, got, err)
		}
	}
}
