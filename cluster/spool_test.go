package cluster

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// TestSpool: what write wrote comes back from the start of the file, with
// its size, and the data directory holds no file of it, during or after;
// a failed write leaves nothing.
func TestSpool(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	before := dirEntries(t, n.cfg.DataDir)
	body := strings.Repeat("a line of a large answer\n", 100_000)
	f, size, err := n.Spool(func(w io.Writer) error {
		if during := dirEntries(t, n.cfg.DataDir); during != before {
			t.Errorf("the data directory holds %q while spooling, %q before", during, before)
		}
		_, err := io.WriteString(w, body)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || size != int64(len(body)) || string(got) != body {
		t.Fatalf("spooled %d bytes (size %d, err %v), want %d", len(got), size, err, len(body))
	}

	failed := errors.New("the state could not be written")
	if _, _, err := n.Spool(func(w io.Writer) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("a failed write: %v", err)
	}
	if after := dirEntries(t, n.cfg.DataDir); after != before {
		t.Errorf("the data directory holds %q after a failed spool, %q before", after, before)
	}
}

func dirEntries(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}
