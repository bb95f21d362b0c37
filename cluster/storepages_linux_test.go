//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

// TestImportLeavesNoStorePagesResident imports links through a real node,
// the way the import handler does, and checks what an operator watching
// the process sees: raft.db's pages that the import made resident leave
// the process's RSS once the import is done, and nothing is lost — every
// link is served, every log entry reads back, the node takes writes, and
// a restart finds it all.
func TestImportLeavesNoStorePagesResident(t *testing.T) {
	dir := t.TempDir()
	n := openNode(t, dir)
	waitFor(t, n.leadership.ready)
	dbPath := filepath.Join(dir, "raft.db")

	const links, perCall = 24000, 2048
	long := strings.Repeat("segment/", 40) // ~320-byte URLs: some 20 MB of log
	codes := make([]string, 0, links)
	var index uint64
	for first := 0; first < links; first += perCall {
		reqs := make([]fsm.CreateRequest, 0, perCall)
		for i := first; i < min(first+perCall, links); i++ {
			code := fmt.Sprintf("imp%06d", i)
			codes = append(codes, code)
			reqs = append(reqs, fsm.CreateRequest{URL: fmt.Sprintf("https://example.com/%s%d", long, i), Workspace: "default", CustomCode: code})
		}
		results, last, err := n.ProposeCreates(context.Background(), reqs).Wait()
		if err != nil {
			t.Fatalf("import: %v", err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("import: %v", r.Err)
			}
		}
		index = max(index, last)
	}

	// Read every entry back, as catching up a follower does: whatever
	// bbolt's appends left resident, the whole log is now.
	if err := verifyLog(n.store); err != nil {
		t.Fatalf("read the log back: %v", err)
	}
	before := residentKiB(t, dbPath)
	if before < 8<<10 {
		t.Fatalf("only %d KiB of raft.db resident after reading back some 20 MB of log", before)
	}
	n.ImportDone()
	after := residentKiB(t, dbPath)
	t.Logf("raft.db resident: %d KiB after the import, %d KiB once it was put away", before, after)
	if after*8 > before {
		t.Errorf("raft.db resident: %d KiB after the import, still %d KiB once it was put away", before, after)
	}
	if snap, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64); snap < index {
		t.Errorf("last snapshot at %d, before the import's last entry %d: a restart would replay the import", snap, index)
	}

	for _, code := range codes {
		if _, ok := n.FSM().Get(code); !ok {
			t.Fatalf("%s is gone after the pages were dropped", code)
		}
	}
	if err := verifyLog(n.store); err != nil {
		t.Fatalf("the log does not read back after the pages were dropped: %v", err)
	}
	added := createURL(t, n, "https://example.com/after-the-import")
	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	n = openNode(t, dir)
	waitFor(t, func() bool {
		_, ok := n.FSM().Get(added.Code)
		return ok
	})
	for _, code := range codes {
		if _, ok := n.FSM().Get(code); !ok {
			t.Fatalf("%s is gone after a restart", code)
		}
	}
}

// residentKiB is how much of the file at path is resident in this
// process through its read-only shared mappings, from /proc/self/smaps.
func residentKiB(t *testing.T, path string) int {
	t.Helper()
	ranges, err := fileMappings(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) == 0 {
		t.Fatalf("%s is not mapped", path)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	ours := false
	total := 0
	for _, line := range strings.Split(string(smaps), "\n") {
		if m, ok := parseMapsLine(line); ok { // a mapping's first line
			ours = false
			for _, r := range ranges {
				ours = ours || m.addrRange == r
			}
			continue
		}
		if rest, ok := strings.CutPrefix(line, "Rss:"); ours && ok {
			kib, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatalf("smaps: %q: %v", line, err)
			}
			total += kib
		}
	}
	return total
}

func TestParseMapsLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line string
		ok   bool
		want mapsLine
	}{
		{"7f1c2a000000-7f1c3a000000 r--s 00000000 fd:01 1234567                    /data/node 1/raft.db",
			true, mapsLine{addrRange{0x7f1c2a000000, 0x7f1c3a000000}, "r--s", 0xfd, 1, 1234567, "/data/node 1/raft.db"}},
		{"7ffd1000-7ffd3000 rw-p 00000000 00:00 0                          [stack]",
			true, mapsLine{addrRange{0x7ffd1000, 0x7ffd3000}, "rw-p", 0, 0, 0, "[stack]"}},
		{"c000000000-c004000000 rw-p 00000000 00:00 0 ", true, mapsLine{addrRange{0xc000000000, 0xc004000000}, "rw-p", 0, 0, 0, ""}},
		{"Rss:                 124 kB", false, mapsLine{}},
		{"VmFlags: rd sh mr mw me ms sd", false, mapsLine{}},
		{"", false, mapsLine{}},
	}
	for _, c := range cases {
		got, ok := parseMapsLine(c.line)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parseMapsLine(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
	// 259:3 in glibc's encoding of a device number.
	if dev := uint64(0x10303); devMajor(dev) != 259 || devMinor(dev) != 3 {
		t.Errorf("device %#x: %d:%d, want 259:3", dev, devMajor(dev), devMinor(dev))
	}
}
