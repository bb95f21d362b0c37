package fsm

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
)

func TestMintedKeysParse(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, key, hash, err := MintKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		gotID, gotHash, ok := ParseKey(key)
		if !ok || gotID != id || gotHash != hash {
			t.Fatalf("ParseKey(%q) = %q, %v; minted id %q", key, gotID, ok, id)
		}
		if seen[id] {
			t.Fatalf("id %s minted twice", id)
		}
		seen[id] = true
		if strings.Contains(key, string(hash[:])) {
			t.Fatal("the key contains its hash")
		}
	}
}

func TestParseKeyRefuses(t *testing.T) {
	_, good, _, _ := MintKey(bytes.NewReader(make([]byte, 64)))
	for name, key := range map[string]string{
		"empty":          "",
		"no prefix":      "xx" + good[2:],
		"short":          good[:len(good)-1],
		"long":           good + "A",
		"bad separator":  good[:15] + "-" + good[16:],
		"uppercase id":   "lr_AAAAAAAAAAAA" + good[15:],
		"not base64url":  good[:len(good)-1] + "+",
		"id with hyphen": "lr_admin-token_" + good[15:],
	} {
		if _, _, ok := ParseKey(key); ok {
			t.Errorf("%s: %q parsed", name, key)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	_, good, _, _ := MintKey(bytes.NewReader(make([]byte, 64)))
	f.Add(good)
	f.Add("lr_")
	f.Add("Bearer " + good)
	f.Fuzz(func(t *testing.T, key string) {
		id, _, ok := ParseKey(key)
		if ok && (!ValidKeyID(id) || !strings.Contains(key, id)) {
			t.Fatalf("ParseKey(%q) accepted id %q", key, id)
		}
	})
}
