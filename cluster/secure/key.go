// Package secure owns everything the cluster key protects: the memberlist
// gossip encryption key, and mutual TLS on the cluster's port (the
// StreamLayer handed to raft.NewNetworkTransport), which carries Raft and the
// nodes' internal HTTP, told apart by the first byte of each connection.
//
// Construction. Every node of a cluster holds the same cluster key: 32
// random bytes in standard base64, given by the operator or made by a node
// at its first start (KeyFile). The raw key is never used directly; each
// purpose gets its own subkey from HKDF-SHA256 with a distinct info string,
// so a leak or misuse in one protocol cannot be turned against another:
//
//   - "linkraft gossip": 32 bytes for memberlist's SecretKey (AES-256-GCM).
//   - "linkraft raft tls": an Ed25519 seed. From it we build one self-signed
//     X.509 certificate deterministically (fixed serial, subject and validity),
//     so every key holder produces the same certificate without a CA or files.
//     Both ends of every Raft connection present it and accept only a peer whose
//     certificate carries that same Ed25519 public key. TLS 1.3 makes each side
//     prove possession of the matching private key, so a handshake completes
//     only between holders of the cluster key. Internal HTTP rides the same
//     connections, so it needs no signature of its own: a request that
//     arrived through the handshake is a key holder's, and TLS keeps it
//     from being read or replayed. (Earlier versions signed those requests
//     with an HMAC under "linkraft internal http"; that subkey is gone.)
//   - "linkraft backup": 32 bytes keying the HMAC-SHA256 that authenticates
//     a backup file (cluster/backup.go), so that a cluster restores only
//     backups made by holders of its key. A backup leaves the cluster and
//     is kept elsewhere; its key is not the gossip or TLS key, so a
//     backup store learns nothing that helps against either.
//   - "linkraft secrets at rest": an AES-256-GCM key sealing the private
//     keys the replicated state holds for the cluster (its certificates
//     and ACME account: cluster/certs), so that a snapshot or backup
//     alone does not give them away (seal.go).
//
// There is no keyless mode: a process on the same host is no more a peer
// than one across the network, so a node never listens without a key.
package secure

import (
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strings"
	"time"
)

// KeySize is the length of a decoded cluster key in bytes.
const KeySize = 32

// HKDF info strings. They are part of the wire protocol: changing one makes
// nodes of different versions unable to talk to each other.
const (
	infoGossip = "linkraft gossip"
	infoTLS    = "linkraft raft tls"
	infoBackup = "linkraft backup"
	// infoSignature derives the secret behind every API key's signature
	// token (SignatureToken).
	infoSignature = "linkraft key signature"
)

// Key is a parsed cluster key. It holds only subkeys derived from the
// operator's key, never the raw bytes. A Key is immutable and safe for
// concurrent use.
type Key struct {
	gossip    [32]byte
	backup    [32]byte
	signature [32]byte
	secrets   cipher.AEAD // seal.go
	cert      tls.Certificate
	pub       ed25519.PublicKey
}

// GenerateKey returns a new random cluster key in the form ParseKey reads
// (what `linkraft keygen` prints).
func GenerateKey() string {
	raw := make([]byte, KeySize)
	rand.Read(raw) // never fails: the runtime aborts rather than return an error
	return base64.StdEncoding.EncodeToString(raw)
}

// ParseKey decodes a cluster key: standard base64 of exactly 32 bytes, as
// `linkraft keygen` prints. Surrounding whitespace is ignored so a key read
// from a file with a trailing newline works. Errors never echo the input,
// because it is a secret.
func ParseKey(b64 string) (*Key, error) {
	s := strings.TrimSpace(b64)
	if s == "" {
		return nil, errors.New("cluster key is empty: want 32 bytes in standard base64 (linkraft keygen prints one)")
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// The decoder's error includes an offset, not the key; still, keep
		// the message generic and wrap for errors.Is/As.
		return nil, fmt.Errorf("cluster key is not standard base64: %w", err)
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("cluster key decodes to %d bytes, want %d (linkraft keygen prints one)", len(raw), KeySize)
	}
	return newKey(raw)
}

// newKey derives every subkey from raw and builds the TLS certificate.
func newKey(raw []byte) (*Key, error) {
	k := &Key{}
	gossip, err := derive(raw, infoGossip)
	if err != nil {
		return nil, err
	}
	copy(k.gossip[:], gossip)
	backup, err := derive(raw, infoBackup)
	if err != nil {
		return nil, err
	}
	copy(k.backup[:], backup)
	signature, err := derive(raw, infoSignature)
	if err != nil {
		return nil, err
	}
	copy(k.signature[:], signature)
	if k.secrets, err = newSecretsAEAD(raw); err != nil {
		return nil, err
	}
	seed, err := derive(raw, infoTLS)
	if err != nil {
		return nil, err
	}
	k.cert, k.pub, err = certificate(seed)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// derive returns 32 bytes of HKDF-SHA256(raw, info). The salt is empty: the
// input is already uniformly random, which is the case where RFC 5869 says a
// salt adds nothing; distinct info strings are what separate the subkeys.
func derive(raw []byte, info string) ([]byte, error) {
	out, err := hkdf.Key(sha256.New, raw, nil, info, 32)
	if err != nil {
		return nil, fmt.Errorf("derive %q subkey: %w", info, err)
	}
	return out, nil
}

// certificate builds the cluster's single self-signed certificate from an
// Ed25519 seed. Every field is fixed, and Ed25519 signatures are
// deterministic, so every node derives byte-identical certificates. The
// validity window is wide because nobody rotates this certificate: rotating
// the cluster key is how trust changes, and the peer check looks only at the
// public key anyway.
func certificate(seed []byte) (tls.Certificate, ed25519.PublicKey, error) {
	priv := ed25519.NewKeyFromSeed(seed)
	pub, ok := priv.Public().(ed25519.PublicKey)
	if !ok {
		return tls.Certificate{}, nil, errors.New("build raft tls certificate: ed25519 public key has unexpected type")
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "linkraft"},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	// rand is required by the signature but unused: the serial is set and
	// Ed25519 signing draws no randomness.
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("build raft tls certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("parse raft tls certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, pub, nil
}

// GossipKey returns the 32-byte memberlist SecretKey (AES-256-GCM). It is a
// fresh copy; callers may keep or modify it.
func (k *Key) GossipKey() []byte {
	out := make([]byte, len(k.gossip))
	copy(out, k.gossip[:])
	return out
}

// BackupMAC returns a new HMAC-SHA256 keyed with the backup subkey: what
// authenticates a backup file. The subkey itself never leaves the Key.
func (k *Key) BackupMAC() hash.Hash { return hmac.New(sha256.New, k.backup[:]) }

// SignatureToken is the secret with which the holder of the API key id,
// whose stored hash is keyHash, signs time-limited requests (YOURLS'
// timestamp and signature): 32 hex digits of an HMAC under the cluster
// key's signature subkey. It is derived, never stored: every node of the
// cluster computes the same one, a new key (a new hash) gets a new one,
// and the replicated state, its snapshots and backups never hold it.
func (k *Key) SignatureToken(keyID string, keyHash []byte) string {
	mac := hmac.New(sha256.New, k.signature[:])
	mac.Write([]byte(keyID))
	mac.Write([]byte{0})
	mac.Write(keyHash)
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// TLSConfig returns a new mutual-TLS configuration for Raft connections,
// usable on both the dialing and the accepting side.
//
// There is no CA and no hostname, so the standard verification is off
// (InsecureSkipVerify on clients, RequireAnyClientCert on servers) and
// VerifyPeerCertificate does the real check: the peer sent exactly one
// certificate, with our Ed25519 public key. TLS 1.3's CertificateVerify proves
// the peer holds the matching private key, which only cluster-key holders can
// derive. Session tickets are disabled because VerifyPeerCertificate is not
// called on resumed sessions; every connection does a full handshake.
func (k *Key) TLSConfig() *tls.Config {
	pub := k.pub
	return &tls.Config{
		Certificates:           []tls.Certificate{k.cert},
		ClientAuth:             tls.RequireAnyClientCert,
		InsecureSkipVerify:     true, //nolint:gosec // VerifyPeerCertificate pins the cluster's public key.
		MinVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: true,
		VerifyPeerCertificate: func(rawCerts [][]byte, _ [][]*x509.Certificate) error {
			return verifyPeer(pub, rawCerts)
		},
	}
}

// errNotClusterPeer is returned (wrapped) by the TLS peer check.
var errNotClusterPeer = errors.New("peer does not hold the cluster key")

func verifyPeer(pub ed25519.PublicKey, rawCerts [][]byte) error {
	if len(rawCerts) != 1 {
		return fmt.Errorf("%w: presented %d certificates, want 1", errNotClusterPeer, len(rawCerts))
	}
	cert, err := x509.ParseCertificate(rawCerts[0])
	if err != nil {
		return fmt.Errorf("%w: parse certificate: %w", errNotClusterPeer, err)
	}
	got, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok || !got.Equal(pub) {
		return fmt.Errorf("%w: certificate public key does not match", errNotClusterPeer)
	}
	return nil
}

// String keeps derived key material out of logs and error messages.
func (k *Key) String() string { return "secure.Key(redacted)" }

// GoString does the same for %#v.
func (k *Key) GoString() string { return k.String() }
