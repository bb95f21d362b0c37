package secure

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// infoSecrets keys the encryption of secrets the replicated state holds
// for the cluster (certificate and ACME account private keys): every node
// holds them, snapshots and backups carry them, and only a holder of the
// cluster key can read them.
const infoSecrets = "linkraft secrets at rest"

// ErrSealed is a sealed secret that does not open: made with another
// cluster key, or changed.
var ErrSealed = errors.New("sealed secret does not open with this cluster key")

// Seal encrypts plain with AES-256-GCM under the secrets subkey, bound to
// aad (what the secret belongs to, so one cannot pass for another): a
// random nonce, then the ciphertext and its tag.
func (k *Key) Seal(plain, aad []byte) []byte {
	nonce := make([]byte, k.secrets.NonceSize())
	rand.Read(nonce) // never fails: the runtime aborts rather than return an error
	return k.secrets.Seal(nonce, nonce, plain, aad)
}

// Open decrypts what Seal made with the same aad; ErrSealed otherwise.
func (k *Key) Open(sealed, aad []byte) ([]byte, error) {
	n := k.secrets.NonceSize()
	if len(sealed) < n+k.secrets.Overhead() {
		return nil, ErrSealed
	}
	plain, err := k.secrets.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, ErrSealed
	}
	return plain, nil
}

func newSecretsAEAD(raw []byte) (cipher.AEAD, error) {
	sub, err := derive(raw, infoSecrets)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(sub)
	if err != nil {
		return nil, fmt.Errorf("secrets cipher: %w", err)
	}
	return cipher.NewGCM(block)
}
