package store

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// crashEnv names the engine directory when the test binary runs as the
// child that crashKeys kills.
const crashEnv = "LINKRAFT_STORE_CRASH_DIR"

const (
	crashKeysPerBatch = 20
	crashMaxBatches   = 200_000
	crashMaxRun       = 20 * time.Second
)

// A process killed in the middle of its commits leaves an engine whose
// applied index and contents agree: every key of every batch at or below
// the index is there, no key of a later batch is. Three rounds, each
// resuming from the index the last one left, as Raft's replay would.
func TestCrashKeepsBatchesWhole(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		runCrashChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills child processes")
	}
	dir := filepath.Join(t.TempDir(), "engine")
	var last uint64
	for round := range 3 {
		killChildMidway(t, dir, time.Duration(20+rand.IntN(280))*time.Millisecond)
		applied := checkWholeBatches(t, dir)
		t.Logf("round %d: killed at applied index %d", round, applied)
		if applied < last {
			t.Errorf("round %d: applied index went back from %d to %d", round, last, applied)
		}
		last = applied
	}
	if last == 0 {
		t.Error("no child committed anything before it was killed")
	}
}

// killChildMidway runs the child until it has committed once, lets it
// commit for wait more, and kills it with SIGKILL.
func killChildMidway(t *testing.T, dir string, wait time.Duration) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashKeepsBatchesWhole$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line == "committing\n"
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Error("the child did not start committing")
		}
	case <-time.After(60 * time.Second):
		t.Error("the child did not start within a minute")
	}
	time.Sleep(wait)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// runCrashChild commits batches after the engine's applied index until it
// is killed (or, bounded, stops by itself).
func runCrashChild(t *testing.T, dir string) {
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	value := make([]byte, 100)
	start := s.AppliedIndex() + 1
	deadline := time.Now().Add(crashMaxRun)
	for i := start; i < start+crashMaxBatches && time.Now().Before(deadline); i++ {
		for j := range crashKeysPerBatch {
			b.Set(crashKey(i, j), value)
		}
		if err := s.Commit(b, i); err != nil {
			t.Fatal(err)
		}
		if i == start {
			fmt.Println("committing")
		}
	}
	s.Close()
}

func crashKey(batch uint64, j int) []byte {
	k := binary.BigEndian.AppendUint64([]byte("k/"), batch)
	return strconv.AppendInt(append(k, '/'), int64(j), 10)
}

// checkWholeBatches opens the engine and checks that it holds exactly the
// keys of the batches up to its applied index, which it returns.
func checkWholeBatches(t *testing.T, dir string) uint64 {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	applied := s.AppliedIndex()
	perBatch := map[uint64]int{}
	s.Scan([]byte("k/"), nil, func(k, _ []byte) bool {
		perBatch[binary.BigEndian.Uint64(k[2:10])]++
		return true
	})
	for batch, n := range perBatch {
		if batch > applied {
			t.Errorf("batch %d has %d keys, above the applied index %d", batch, n, applied)
		} else if n != crashKeysPerBatch {
			t.Errorf("batch %d has %d keys, want %d", batch, n, crashKeysPerBatch)
		}
	}
	if uint64(len(perBatch)) != applied {
		t.Errorf("%d batches present, applied index %d", len(perBatch), applied)
	}
	return applied
}
