package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestMutationsAreNotStale: every mutation's text occurs once in the file
// it names, and its guard names a test that exists, so code moved or
// renamed fails here, at once, rather than as "stale" in a long run of
// `make mutate`.
func TestMutationsAreNotStale(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutations {
		files := map[string][]byte{}
		for _, e := range m.edits() {
			src, ok := files[e.file]
			if !ok {
				if src, err = os.ReadFile(filepath.Join(root, e.file)); err != nil {
					t.Errorf("%s: %v", m.name, err)
					continue
				}
			}
			if n := bytes.Count(src, []byte(e.from)); n != 1 {
				t.Errorf("%s: the text to change occurs %d times in %s, want once", m.name, n, e.file)
				continue
			}
			files[e.file] = bytes.Replace(src, []byte(e.from), []byte(e.to), 1)
		}
		if !guardExists(t, root, m) {
			t.Errorf("%s: no test in %s matches %s", m.name, m.pkg, m.run)
		}
	}
}

// guardExists reports whether some test function in m's package matches
// m's run pattern.
func guardExists(t *testing.T, root string, m mutation) bool {
	t.Helper()
	run, err := regexp.Compile(m.run)
	if err != nil {
		t.Fatalf("%s: run: %v", m.name, err)
	}
	tests, err := filepath.Glob(filepath.Join(root, m.pkg, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	for _, f := range tests {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range decl.FindAllSubmatch(src, -1) {
			if run.Match(name[1]) {
				return true
			}
		}
	}
	return false
}
