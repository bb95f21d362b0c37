package fsm

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

var raiseCerts = RaiseCommand{To: LevelCerts}.Encode()

func certFor(name string) Certificate {
	return Certificate{Name: name, Chain: "-----BEGIN CERTIFICATE-----\n" + name, Key: "sealed key of " + name, NotBefore: 10, NotAfter: 20}
}

// TestCertificateState: every change applies as its command says, and
// what is stored survives a snapshot byte for byte.
func TestCertificateState(t *testing.T) {
	f := New()
	account := ACMEAccount{Directory: "https://ca.example/dir", URL: "https://ca.example/acct/1", Key: "sealed"}
	cmds := [][]byte{
		InitCommand{Key: testKey}.Encode(),
		raiseCerts,
		CertCommand{Kind: SetACMEAccount, Account: account}.Encode(),
		CertCommand{Kind: SetOrder, Order: Order{Name: "s.example", URL: "https://ca.example/order/1", Started: 5}}.Encode(),
		CertCommand{Kind: SetOrder, Order: Order{Name: "b.example", URL: "https://ca.example/order/2", Started: 6}}.Encode(),
		CertCommand{Kind: SetChallenge, Challenge: Challenge{Token: "tok1", KeyAuth: "tok1.thumb", Expires: 50}}.Encode(),
		CertCommand{Kind: SetChallenge, Challenge: Challenge{Token: "tok2", KeyAuth: "tok2.thumb", Expires: 50}}.Encode(),
		CertCommand{Kind: RemoveChallenge, Challenge: Challenge{Token: "tok1"}}.Encode(),
		CertCommand{Kind: SetCertificate, Certificate: certFor("s.example")}.Encode(),
	}
	for i, r := range applyAll(t, f, cmds...) {
		if err, ok := r.(error); ok {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if got, ok := f.ACMEAccount(); !ok || got != account {
		t.Fatalf("account %+v", got)
	}
	if c, ok := f.Certificate("s.example"); !ok || c != certFor("s.example") {
		t.Fatalf("certificate %+v", c)
	}
	if _, ok := f.Challenge("tok1"); ok {
		t.Fatal("a removed challenge is still answered")
	}
	if c, ok := f.Challenge("tok2"); !ok || c.KeyAuth != "tok2.thumb" {
		t.Fatalf("challenge %+v", c)
	}
	// The certificate ended its name's order; the other order goes on.
	if o := f.Orders(); len(o) != 1 || o[0].Name != "b.example" {
		t.Fatalf("orders %+v", o)
	}
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV9 {
		t.Fatalf("snapshot version %d, want %d", v, snapshotV9)
	}
	g := roundTrip(t, f)
	if !reflect.DeepEqual(g.Certificates(), f.Certificates()) || !reflect.DeepEqual(g.Challenges(), f.Challenges()) || !reflect.DeepEqual(g.Orders(), f.Orders()) {
		t.Fatal("the certificate state differs after a snapshot")
	}
}

// TestCertificateRefusals: nothing is stored before the cluster is raised
// to LevelCerts (a TLS-ALPN-01 challenge: to LevelVisitRows), nor past a
// bound; a refusal changes nothing.
func TestCertificateRefusals(t *testing.T) {
	cases := []struct {
		name   string
		raised int
		cmd    CertCommand
	}{
		{"before the raise", 0, CertCommand{Kind: SetCertificate, Certificate: certFor("s.example")}},
		{"a bad name", LevelCerts, CertCommand{Kind: SetCertificate, Certificate: certFor("S_EXAMPLE")}},
		{"a chain too long", LevelCerts, CertCommand{Kind: SetCertificate, Certificate: Certificate{Name: "s.example", Chain: strings.Repeat("x", MaxCertChain+1), Key: "k", NotAfter: 1}}},
		{"no key", LevelCerts, CertCommand{Kind: SetCertificate, Certificate: Certificate{Name: "s.example", Chain: "c", NotAfter: 1}}},
		{"no validity", LevelCerts, CertCommand{Kind: SetCertificate, Certificate: Certificate{Name: "s.example", Chain: "c", Key: "k"}}},
		{"an account without a key", LevelCerts, CertCommand{Kind: SetACMEAccount, Account: ACMEAccount{Directory: "https://ca.example/"}}},
		{"a challenge without a token", LevelCerts, CertCommand{Kind: SetChallenge, Challenge: Challenge{KeyAuth: "x"}}},
		{"a key authorization too long", LevelCerts, CertCommand{Kind: SetChallenge, Challenge: Challenge{Token: "t", KeyAuth: strings.Repeat("x", MaxChallengeText+1)}}},
		{"an unknown change", LevelCerts, CertCommand{Kind: 99}},
		{"a TLS-ALPN-01 challenge below level 9", LevelCerts, alpnChallenge("s.example")},
		{"a TLS-ALPN-01 challenge for a bad name", LevelVisitRows, alpnChallenge("S_EXAMPLE")},
		{"a TLS-ALPN-01 challenge with a short digest", LevelVisitRows, CertCommand{Kind: SetChallenge,
			Challenge: Challenge{Token: TLSALPNToken("s.example"), KeyAuth: strings.Repeat("ab", 31)}}},
		{"a TLS-ALPN-01 challenge with its key authorization, not the digest", LevelVisitRows, CertCommand{Kind: SetChallenge,
			Challenge: Challenge{Token: TLSALPNToken("s.example"), KeyAuth: "tok.thumb"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			applyAll(t, f, InitCommand{Key: testKey}.Encode())
			if tc.raised > 0 {
				applyAll(t, f, RaiseCommand{To: tc.raised}.Encode())
			}
			before := snapshotBytes(t, f)
			res := applyAll(t, f, tc.cmd.Encode())[0]
			if err, _ := res.(error); err == nil || !errors.Is(err, ErrInvalidRequest) && !strings.Contains(err.Error(), "certificate change") {
				t.Fatalf("applied: %v", res)
			}
			if string(before) != string(snapshotBytes(t, f)) {
				t.Fatal("a refused change changed the state")
			}
		})
	}
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), raiseCerts)
	for i := range MaxCertificates {
		applyAll(t, f, CertCommand{Kind: SetCertificate, Certificate: certFor(fmt.Sprintf("n%d.example", i))}.Encode())
	}
	if err, _ := applyAll(t, f, CertCommand{Kind: SetCertificate, Certificate: certFor("extra.example")}.Encode())[0].(error); err == nil {
		t.Fatalf("certificate %d stored", MaxCertificates+1)
	}
	if err, _ := applyAll(t, f, CertCommand{Kind: SetCertificate, Certificate: certFor("n0.example")}.Encode())[0].(error); err != nil {
		t.Fatalf("renewing a stored name when full: %v", err)
	}
}

// TestRestoreKeepsTheClusterCertificates: a restore keeps the cluster's
// account and certificates, whose keys only this cluster's key opens.
func TestRestoreKeepsTheClusterCertificates(t *testing.T) {
	cur, backup := New(), New()
	applyAll(t, cur, InitCommand{Key: testKey}.Encode(), raiseCerts, CertCommand{Kind: SetCertificate, Certificate: certFor("s.example")}.Encode())
	applyAll(t, backup, InitCommand{Key: testKey}.Encode(), raiseCerts, CertCommand{Kind: SetCertificate, Certificate: certFor("other.example")}.Encode())
	next := backup.s
	keepHandedOut(next, cur.s)
	if _, ok := next.certs.certs["s.example"]; !ok || len(next.certs.certs) != 1 {
		t.Fatalf("restored certificates: %v; want the cluster's", next.certs.certs)
	}
}

// alpnChallenge sets a TLS-ALPN-01 challenge for name.
func alpnChallenge(name string) CertCommand {
	return CertCommand{Kind: SetChallenge, Challenge: Challenge{Token: TLSALPNToken(name), KeyAuth: strings.Repeat("0f", 32), Expires: 50}}
}

// TestTLSALPNChallenge: a TLS-ALPN-01 challenge is stored beside the
// HTTP-01 ones once the cluster is raised to LevelVisitRows, survives a
// snapshot, and is removed like them; its command needs that level.
func TestTLSALPNChallenge(t *testing.T) {
	f := New()
	set := alpnChallenge("s.example")
	for i, r := range applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelVisitRows}.Encode(), set.Encode(),
		CertCommand{Kind: SetChallenge, Challenge: Challenge{Token: "tok1", KeyAuth: "tok1.thumb"}}.Encode()) {
		if err, ok := r.(error); ok {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if c, ok := f.Challenge(TLSALPNToken("s.example")); !ok || c != set.Challenge {
		t.Fatalf("challenge %+v, %v", c, ok)
	}
	if name, alpn := set.Challenge.TLSALPNName(); !alpn || name != "s.example" {
		t.Fatalf("TLSALPNName: %q, %v", name, alpn)
	}
	if _, alpn := (Challenge{Token: "tok1"}).TLSALPNName(); alpn {
		t.Fatal("an HTTP-01 token taken for TLS-ALPN-01")
	}
	if g := roundTrip(t, f); !reflect.DeepEqual(g.Challenges(), f.Challenges()) {
		t.Fatalf("challenges after a snapshot: %+v, want %+v", g.Challenges(), f.Challenges())
	}
	remove := CertCommand{Kind: RemoveChallenge, Challenge: Challenge{Token: TLSALPNToken("s.example")}}
	applyAll(t, f, remove.Encode())
	if _, ok := f.Challenge(TLSALPNToken("s.example")); ok {
		t.Fatal("a removed TLS-ALPN-01 challenge is still there")
	}
	for _, tc := range []struct {
		cmd  CertCommand
		want int
	}{
		{set, LevelVisitRows}, {remove, LevelVisitRows},
		{CertCommand{Kind: SetChallenge, Challenge: Challenge{Token: "tok1"}}, LevelCerts},
		{CertCommand{Kind: SetCertificate, Certificate: certFor("s.example")}, LevelCerts},
	} {
		if got := tc.cmd.Level(); got != tc.want {
			t.Errorf("%+v: level %d, want %d", tc.cmd, got, tc.want)
		}
	}
}
