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
// to LevelCerts, nor past a bound; a refusal changes nothing.
func TestCertificateRefusals(t *testing.T) {
	cases := []struct {
		name   string
		raised bool
		cmd    CertCommand
	}{
		{"before the raise", false, CertCommand{Kind: SetCertificate, Certificate: certFor("s.example")}},
		{"a bad name", true, CertCommand{Kind: SetCertificate, Certificate: certFor("S_EXAMPLE")}},
		{"a chain too long", true, CertCommand{Kind: SetCertificate, Certificate: Certificate{Name: "s.example", Chain: strings.Repeat("x", MaxCertChain+1), Key: "k", NotAfter: 1}}},
		{"no key", true, CertCommand{Kind: SetCertificate, Certificate: Certificate{Name: "s.example", Chain: "c", NotAfter: 1}}},
		{"no validity", true, CertCommand{Kind: SetCertificate, Certificate: Certificate{Name: "s.example", Chain: "c", Key: "k"}}},
		{"an account without a key", true, CertCommand{Kind: SetACMEAccount, Account: ACMEAccount{Directory: "https://ca.example/"}}},
		{"a challenge without a token", true, CertCommand{Kind: SetChallenge, Challenge: Challenge{KeyAuth: "x"}}},
		{"a key authorization too long", true, CertCommand{Kind: SetChallenge, Challenge: Challenge{Token: "t", KeyAuth: strings.Repeat("x", MaxChallengeText+1)}}},
		{"an unknown change", true, CertCommand{Kind: 99}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			applyAll(t, f, InitCommand{Key: testKey}.Encode())
			if tc.raised {
				applyAll(t, f, raiseCerts)
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
