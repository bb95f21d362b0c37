package fsm

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
)

// The API key a client sends is "lr_", the key's id (KeyIDLength
// characters), "_" and a secret of 32 random bytes in unpadded base64url.
// The id is public: it finds the key without scanning; only a SHA-256 of
// the secret part is stored. A plain hash suits a secret of 256 random
// bits (it cannot be guessed, so stretching buys nothing) and keeps each
// request's check to one hash.
const (
	keyPrefix       = "lr_"
	keySecretBytes  = 32
	keySecretLength = 43 // base64url of 32 bytes, no padding
	keyLength       = len(keyPrefix) + KeyIDLength + 1 + keySecretLength
	keyIDAlphabet   = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// MintKey makes a new API key from the random bytes of r: its id, the key
// as the client will send it, and the hash the state stores.
func MintKey(r io.Reader) (id, key string, hash [KeyHashSize]byte, err error) {
	var raw [KeyIDLength + keySecretBytes]byte
	if _, err := io.ReadFull(r, raw[:]); err != nil {
		return "", "", hash, fmt.Errorf("mint key: %w", err)
	}
	idBytes := make([]byte, KeyIDLength)
	for i, b := range raw[:KeyIDLength] {
		idBytes[i] = keyIDAlphabet[int(b)%len(keyIDAlphabet)] // 36 letters: a slight bias, in a public id only
	}
	secret := base64.RawURLEncoding.EncodeToString(raw[KeyIDLength:])
	id = string(idBytes)
	return id, keyPrefix + id + "_" + secret, sha256.Sum256([]byte(secret)), nil
}

// ParseKey splits a key a client sent into its id and the hash of its
// secret, which the caller compares with the stored hash in constant time.
func ParseKey(key string) (id string, hash [KeyHashSize]byte, ok bool) {
	if len(key) != keyLength || key[:len(keyPrefix)] != keyPrefix || key[len(keyPrefix)+KeyIDLength] != '_' {
		return "", hash, false
	}
	id = key[len(keyPrefix) : len(keyPrefix)+KeyIDLength]
	secret := key[len(keyPrefix)+KeyIDLength+1:]
	if !ValidKeyID(id) {
		return "", hash, false
	}
	if _, err := base64.RawURLEncoding.DecodeString(secret); err != nil {
		return "", hash, false
	}
	return id, sha256.Sum256([]byte(secret)), true
}
