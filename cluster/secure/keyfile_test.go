package secure

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestKeyFile: the first call makes the key (owner-only, in a directory
// it makes), later calls read the same one, and the file holds what
// `linkraft keygen` prints.
func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "cluster.key")
	first, made, err := KeyFile(path)
	if err != nil || !made {
		t.Fatalf("first KeyFile: made %v, %v; want a new key", made, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("mode %o, want 600", mode)
	}
	again, made, err := KeyFile(path)
	if err != nil || made {
		t.Fatalf("second KeyFile: made %v, %v; want the kept key", made, err)
	}
	if !bytes.Equal(first.GossipKey(), again.GossipKey()) {
		t.Fatal("the second call returned another key")
	}
	text, _ := os.ReadFile(path)
	if k, err := ParseKey(string(text)); err != nil || !bytes.Equal(k.GossipKey(), first.GossipKey()) {
		t.Fatalf("the file does not hold the key in keygen's form: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d entries in the key's directory, want the key alone", len(entries))
	}
}

// TestKeyFileRace: processes that share one key file and start at once
// (the Procfile's three nodes) end up with one key; exactly one makes it.
func TestKeyFileRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.key")
	const starters = 16
	keys := make([]*Key, starters)
	made := make([]bool, starters)
	errs := make([]error, starters)
	var wg sync.WaitGroup
	for i := range starters {
		wg.Go(func() { keys[i], made[i], errs[i] = KeyFile(path) })
	}
	wg.Wait()
	makers := 0
	for i := range starters {
		if errs[i] != nil {
			t.Fatalf("starter %d: %v", i, errs[i])
		}
		if made[i] {
			makers++
		}
		if !bytes.Equal(keys[i].GossipKey(), keys[0].GossipKey()) {
			t.Fatalf("starters 0 and %d hold different keys", i)
		}
	}
	if makers != 1 {
		t.Fatalf("%d starters made the key, want 1", makers)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d entries in the key's directory, want the key alone", len(entries))
	}
}

// TestKeyFileKeepsABadFile: a file that does not hold a key is an error
// that does not show its content, and is never replaced by a new key,
// which would split the nodes that share it.
func TestKeyFileKeepsABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.key")
	const content = "not-a-key-but-maybe-a-secret\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := KeyFile(path); err == nil || strings.Contains(err.Error(), "maybe-a-secret") {
		t.Fatalf("KeyFile of a bad file: %v; want an error without its content", err)
	}
	if got, _ := os.ReadFile(path); string(got) != content {
		t.Fatal("the bad file was replaced")
	}
}

func TestReadKeyFileMissing(t *testing.T) {
	_, err := ReadKeyFile(filepath.Join(t.TempDir(), "none"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadKeyFile of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestGenerateKey(t *testing.T) {
	a, b := GenerateKey(), GenerateKey()
	if a == b {
		t.Fatal("two keys are the same")
	}
	if _, err := ParseKey(a); err != nil {
		t.Fatalf("ParseKey of a generated key: %v", err)
	}
}
