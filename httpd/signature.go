package httpd

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"hash"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/linkraft/linkraft/fsm"
)

// A time-limited signature is a credential that never carries the key:
// the client proves it holds the key's signature token (the Node's
// SignatureToken, derived from the cluster key, the key's id and its
// stored hash; GET /api/v1/key shows it to the key itself) by hashing it
// with a Unix timestamp, as YOURLS' API clients do (timestamp and
// signature, with md5 or hash=sha256|sha384|sha512, the token before or
// after the timestamp). A request carries it in signatureHeader as
// "<key id> <timestamp> <algorithm> <hex signature>"; YOURLS' adapter,
// whose clients do not name the key, finds the key whose token the
// signature matches and writes the header (findSigner). It is checked
// wherever a key is, the leader included when a write is forwarded.
const (
	signatureHeader = "X-Api-Signature"
	// signatureLife bounds how far a signed timestamp may lie from now,
	// either way: YOURLS' nonce life.
	signatureLife = 12 * time.Hour
	// signerChecksPerSecond bounds the signature checks a node spends
	// looking for the key a signature was made with (findSigner): each
	// live key costs a check, and a client that is no key's holder can
	// ask for any number of searches.
	signerChecksPerSecond = 200_000
)

// signatureAlgorithms are the hashes a signature may be made with.
var signatureAlgorithms = map[string]func() hash.Hash{
	"md5": md5.New, "sha256": sha256.New, "sha384": sha512.New384, "sha512": sha512.New,
}

// signedCredential is a time-limited signature as a request carries it.
type signedCredential struct {
	keyID     string
	timestamp string
	algorithm string
	signature []byte
}

// parseSigned reads signatureHeader's value; ok is false for a malformed
// one.
func parseSigned(v []byte) (signedCredential, bool) {
	f := bytes.Fields(v)
	if len(f) != 4 {
		return signedCredential{}, false
	}
	sig, err := hex.DecodeString(string(f[3]))
	c := signedCredential{keyID: string(f[0]), timestamp: string(f[1]), algorithm: string(f[2]), signature: sig}
	if _, known := signatureAlgorithms[c.algorithm]; err != nil || !known || !fsm.ValidKeyID(c.keyID) {
		return signedCredential{}, false
	}
	return c, true
}

// header is c as signatureHeader carries it.
func (c signedCredential) header() string {
	return c.keyID + " " + c.timestamp + " " + c.algorithm + " " + hex.EncodeToString(c.signature)
}

// fresh reports whether c's timestamp lies within signatureLife of now.
func (c signedCredential) fresh(now time.Time) bool {
	ts, err := strconv.ParseInt(c.timestamp, 10, 64)
	if err != nil || ts <= 0 {
		return false
	}
	d := now.Sub(time.Unix(ts, 0))
	return d < signatureLife && d > -signatureLife
}

// madeWith reports whether c's signature is the hash of its timestamp and
// token, in either order. The comparisons take constant time.
func (c signedCredential) madeWith(token string) bool {
	newHash := signatureAlgorithms[c.algorithm]
	match := 0
	for _, msg := range []string{c.timestamp + token, token + c.timestamp} {
		h := newHash()
		h.Write([]byte(msg))
		match |= subtle.ConstantTimeCompare(h.Sum(nil), c.signature)
	}
	return match == 1
}

// signers finds the key a time-limited signature was made with, within a
// node-wide budget of checks.
type signers struct {
	token  func(keyID string, keyHash []byte) string
	budget *rate.Limiter
}

func newSigners(token func(string, []byte) string) *signers {
	return &signers{token: token, budget: rate.NewLimiter(signerChecksPerSecond, signerChecksPerSecond)}
}

// find returns the id of the live key among keys whose token c's
// signature (its key id ignored) was made with; ok is false for none, and
// spent when the node's budget of checks is spent.
func (s *signers) find(keys []fsm.APIKey, c signedCredential, now time.Time) (id string, ok, spent bool) {
	if s.token == nil || !c.fresh(now) {
		return "", false, false
	}
	if !s.budget.AllowN(now, len(keys)) {
		return "", false, true
	}
	for i := range keys {
		k := &keys[i]
		if !k.Expired(now.UnixMilli()) && c.madeWith(s.token(k.ID, k.Hash[:])) {
			return k.ID, true, false
		}
	}
	return "", false, false
}
