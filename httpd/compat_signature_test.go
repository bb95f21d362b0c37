package httpd

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
)

// signatureServer is a test server whose keys have signature tokens, and
// a key that may write links with its token, as GET /api/v1/key shows it
// to the key itself.
func signatureServer(t *testing.T) (s *Server, keyID, key, token string) {
	t.Helper()
	cluster := newClusterKey(t)
	s = newTestServer(t, func(c *Config) { c.SignatureToken = cluster.SignatureToken })
	keyID, key = addKey(t, s, fsm.ScopeLinksRead|fsm.ScopeLinksWrite|fsm.ScopeStatsRead, 0, fsm.AllWorkspaces)
	own := do(s, "GET", "/api/v1/key", "", "", "Authorization", "Bearer "+key)
	token, _ = body(t, own)["signature_token"].(string)
	if status(own) != 200 || len(token) != 32 {
		t.Fatalf("the key's own view: %d %s, want its 32-digit signature token", status(own), own.Response.Body())
	}
	if root := body(t, do(s, "GET", "/api/v1/key", "", "")); root["signature_token"] != nil {
		t.Fatalf("the operator's token has a signature token: %v", root)
	}
	return s, keyID, key, token
}

// signed is hex(h(first + second)).
func signed(h func() hash.Hash, first, second string) string {
	d := h()
	d.Write([]byte(first + second))
	return hex.EncodeToString(d.Sum(nil))
}

// TestYOURLSTimeLimitedSignatures: YOURLS' clients sign a request with
// the hash of a timestamp and the key's signature token instead of
// sending a secret; each case follows YOURLS' own tests of
// yourls_check_signature_timestamp (tests/tests/auth/SigTest.php) or
// functions-auth.php.
func TestYOURLSTimeLimitedSignatures(t *testing.T) {
	s, _, key, token := signatureServer(t)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	at := func(d time.Duration) string { return strconv.FormatInt(time.Now().Add(d).Unix(), 10) }
	const life = 12 * time.Hour // YOURLS_NONCE_LIFE
	cases := []struct {
		name                       string
		timestamp, signature, algo string
		want                       int
	}{
		// SigTest::test_signature_timestamp_sha256, both orders.
		{"sha256 by default, timestamp first", now, signed(sha256.New, now, token), "", 200},
		{"sha256 by default, token first", now, signed(sha256.New, token, now), "", 200},
		// SigTest::test_signature_timestamp_hash: sha256, sha384, sha512.
		{"hash=sha384", now, signed(sha512.New384, now, token), "sha384", 200},
		{"hash=sha512, token first", now, signed(sha512.New, token, now), "sha512", 200},
		{"hash=sha256 named", now, signed(sha256.New, now, token), "sha256", 200},
		// Before YOURLS 1.7.7: md5(timestamp . token), no hash parameter.
		{"md5, as older clients send it", now, signed(md5.New, now, token), "", 200},
		{"an unknown hash", now, signed(sha256.New, now, token), "crc32", 403},
		{"a hash that does not match the one named", now, signed(sha256.New, now, token), "sha512", 403},
		// SigTest::test_signature_timestamp_random.
		{"a random signature", now, signed(sha256.New, now, "not the token"), "", 403},
		{"the key itself hashed", now, signed(sha256.New, now, key), "", 403},
		{"not hex", now, "zz" + signed(sha256.New, now, token)[2:], "", 403},
		// SigTest::timestamps: within the nonce life either way, not past it, not 0.
		{"half the nonce life ago", at(-life / 2), signed(sha256.New, at(-life/2), token), "", 200},
		{"half the nonce life ahead", at(life / 2), signed(sha256.New, at(life/2), token), "", 200},
		{"twice the nonce life ago", at(-2 * life), signed(sha256.New, at(-2*life), token), "", 403},
		{"twice the nonce life ahead", at(2 * life), signed(sha256.New, at(2*life), token), "", 403},
		{"timestamp 0", "0", signed(sha256.New, "0", token), "", 403},
		{"a timestamp that is no number", "soon", signed(sha256.New, "soon", token), "", 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := url.Values{"action": {"db-stats"}, "format": {"json"}, "timestamp": {tc.timestamp}, "signature": {tc.signature}}
			if tc.algo != "" {
				q.Set("hash", tc.algo)
			}
			ctx := do(s, "GET", "/yourls-api.php?"+q.Encode(), "", "", "Authorization", "")
			if got := status(ctx); got != tc.want {
				t.Fatalf("status %d, want %d: %s", got, tc.want, ctx.Response.Body())
			}
			if tc.want == 403 && body(t, ctx)["message"] != "Invalid username or password" {
				t.Errorf("refusal %s, want YOURLS' login failure", ctx.Response.Body())
			}
		})
	}
}

// TestSignedWritesAreTheKeys: a signed shorturl creates a link as the key
// that signed it (its audit entry names the key); once the key is revoked
// its signatures are refused, and the signature header naming another
// key than the one whose token made it is refused too.
func TestSignedWritesAreTheKeys(t *testing.T) {
	s, keyID, _, token := signatureServer(t)
	now := strconv.FormatInt(time.Now().Unix(), 10)
	sig := signed(sha256.New, now, token)
	q := url.Values{"action": {"shorturl"}, "format": {"json"}, "url": {"https://example.com/signed"}, "keyword": {"signed"},
		"timestamp": {now}, "signature": {sig}}
	if ctx := do(s, "GET", "/yourls-api.php?"+q.Encode(), "", "", "Authorization", ""); status(ctx) != 200 {
		t.Fatalf("a signed shorturl: %d %s", status(ctx), ctx.Response.Body())
	}
	entries := s.fsm.Audit(fsm.AuditQuery{Kind: fsm.AuditLinks, Limit: 10})
	if len(entries) == 0 || entries[0].Subject != "signed" || entries[0].KeyID != keyID {
		t.Fatalf("the create's audit: %+v, want signed created by %s", entries, keyID)
	}

	otherID, _ := addKey(t, s, fsm.ScopeLinksRead, 0, fsm.AllWorkspaces)
	header := otherID + " " + now + " sha256 " + sig
	if ctx := do(s, "GET", "/api/v1/urls/signed", "", "", "Authorization", "", signatureHeader, header); status(ctx) != 401 {
		t.Fatalf("a signature naming another key: %d %s, want 401", status(ctx), ctx.Response.Body())
	}
	if ctx := do(s, "GET", "/api/v1/urls/signed", "", "", "Authorization", "", signatureHeader, keyID+" "+now+" sha256 "+sig); status(ctx) != 200 {
		t.Fatalf("the signature header of the key: %d %s, want 200", status(ctx), ctx.Response.Body())
	}

	if ctx := do(s, "DELETE", "/admin/keys/"+keyID, "", ""); status(ctx) != 204 && status(ctx) != 200 {
		t.Fatalf("revoke: %d %s", status(ctx), ctx.Response.Body())
	}
	q.Set("action", "db-stats")
	if ctx := do(s, "GET", "/yourls-api.php?"+q.Encode(), "", "", "Authorization", ""); status(ctx) != 403 {
		t.Fatalf("a revoked key's signature: %d %s, want 403", status(ctx), ctx.Response.Body())
	}
}

// FuzzSignatureHeader: whatever X-Api-Signature holds, the check never
// panics and accepts only a fresh signature of the key's own token.
func FuzzSignatureHeader(f *testing.F) {
	state := fsm.New()
	id, _, keyHash, err := fsm.MintKey(rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	cmd := fsm.KeyCreateCommand{By: fsm.RootKeyID, Now: 1,
		Key: fsm.APIKey{ID: id, Hash: keyHash, Scopes: fsm.ScopeLinksRead, Workspaces: []string{fsm.AllWorkspaces}, CreatedAt: 1}}.Encode()
	if res := state.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: cmd}); res != nil {
		f.Fatalf("create key: %v", res)
	}
	cluster, err := secure.ParseKey(secure.GenerateKey())
	if err != nil {
		f.Fatal(err)
	}
	a := &authority{fsm: state, signatures: newSigners(cluster.SignatureToken)}
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := signed(sha256.New, ts, cluster.SignatureToken(id, keyHash[:]))
	genuine := id + " " + ts + " sha256 " + sig
	for _, seed := range []string{genuine, id + " " + ts + " md5 00", "x 1 sha256 ab", " ", id + "  " + ts + " sha512 " + strings.Repeat("0", 128)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var h fasthttp.RequestHeader
		h.Set(signatureHeader, v)
		sent := string(h.Peek(signatureHeader))
		_, res := a.checkKey(&h, now, false)
		f := strings.Fields(sent)
		want := len(f) == 4 && f[0] == id && f[1] == ts && f[2] == "sha256" && strings.EqualFold(f[3], sig)
		if (res == authOK) != want {
			t.Fatalf("%s %q: accepted %v, want %v", signatureHeader, sent, res == authOK, want)
		}
	})
}

// TestSignerSearchIsBudgeted: looking for the key an anonymous signature
// was made with costs a check per live key, taken from a node-wide budget
// before any hashing; once the budget is spent a search is refused as
// busy and hashes nothing.
func TestSignerSearchIsBudgeted(t *testing.T) {
	cluster := newClusterKey(t)
	hashed := 0
	token := func(id string, h []byte) string { hashed++; return cluster.SignatureToken(id, h) }
	s := &signers{token: token, budget: rate.NewLimiter(0, 5)} // five checks, never refilled
	keys := []fsm.APIKey{{ID: "k1aaaaaaaaaa"}, {ID: "k2aaaaaaaaaa"}, {ID: "k3aaaaaaaaaa"}}
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	sig, _ := hex.DecodeString(signed(sha256.New, ts, cluster.SignatureToken(keys[2].ID, keys[2].Hash[:])))
	c := signedCredential{timestamp: ts, algorithm: "sha256", signature: sig}
	if id, ok, busy := s.find(keys, c, now); !ok || busy || id != keys[2].ID {
		t.Fatalf("first search: %q %v %v, want %s", id, ok, busy, keys[2].ID)
	}
	hashed = 0
	if id, ok, busy := s.find(keys, c, now); ok || !busy || hashed != 0 {
		t.Fatalf("past the budget: %q ok %v busy %v after %d tokens made, want busy and none", id, ok, busy, hashed)
	}
}
