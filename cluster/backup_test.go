package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/linkraft/linkraft/fsm"
)

// TestRestoreUnderConcurrentCreates: creates acknowledged while a restore
// runs either survive it or leave their code out of use; none is handed out
// again afterwards, so no short link ever changes target.
func TestRestoreUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	n := openNode(t, t.TempDir())
	createURL(t, n, "https://example.com/before-backup")
	// Enough links that merging and encoding take a while: long enough for
	// racing creates to be applied in between, were they not held back.
	bulk := make([]fsm.CreateRequest, 50000)
	for i := range bulk {
		bulk[i] = fsm.CreateRequest{URL: fmt.Sprintf("https://example.com/bulk/%d", i), Workspace: "default", CodeLength: 7}
	}
	if _, _, err := n.ProposeCreates(context.Background(), bulk).Wait(); err != nil {
		t.Fatalf("bulk creates: %v", err)
	}
	var backup bytes.Buffer
	if err := n.Backup(&backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	createURL(t, n, "https://example.com/after-backup")

	var (
		mu    sync.Mutex
		acked = map[string]string{} // code → target of every acknowledged create
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 { // bounded; stopped once the restore is done
				select {
				case <-stop:
					return
				default:
				}
				url := fmt.Sprintf("https://example.com/racing/%d/%d", w, i)
				res, err := n.Create(context.Background(), fsm.CreateRequest{URL: url, Workspace: "default", CodeLength: 7})
				if err == nil && res.Err == nil {
					mu.Lock()
					acked[res.Link.Code] = url
					mu.Unlock()
				}
			}
		}()
	}
	err := n.Restore(backup.Bytes(), RestoreOptions{})
	// A few more creates land on the restored state before the writers stop.
	for range 20 {
		createURL(t, n, "https://example.com/after-restore")
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if len(acked) == 0 {
		t.Fatal("no create was acknowledged around the restore")
	}

	f := n.FSM()
	for code, url := range acked {
		if l, ok := f.Get(code); ok && l.URL != url {
			t.Fatalf("code %s was acknowledged for %s and now leads to %s", code, url, l.URL)
		}
	}
	for i := range 300 {
		l := createURL(t, n, fmt.Sprintf("https://example.com/later/%d", i))
		if url, ok := acked[l.Code]; ok {
			t.Fatalf("code %s, acknowledged for %s before, was handed out again for %s", l.Code, url, l.URL)
		}
	}
	for code := range acked {
		if _, ok := f.Get(code); ok {
			continue
		}
		res, err := n.Create(context.Background(), fsm.CreateRequest{URL: "https://stranger.example/", Workspace: "default", CustomCode: code})
		if err != nil || !errors.Is(res.Err, fsm.ErrCodeTaken) {
			t.Fatalf("custom create of retired code %s: %+v, %v; want ErrCodeTaken", code, res, err)
		}
	}
}

// TestRestoreFromReadsAStream: a 64 MiB file that starts as a backup but
// is none, or a small one that decompresses without end, is refused, as
// damage, after being read as a stream: its MAC, its snapshot's checksum
// or its decoding each hold a block of it at a time, never the whole.
func TestRestoreFromReadsAStream(t *testing.T) {
	// Not parallel: it measures what the whole process allocates.
	n := openKeyed(t, newClusterKey(t))
	large := func(format byte) func(t *testing.T, w io.Writer) {
		return func(t *testing.T, w io.Writer) { writeLarge(t, w, format, 64<<20) }
	}
	// zeros is a compressed backup, not authenticated, of 256 MiB of
	// zeros: a few KiB that would decompress without end.
	zeros := func(opts ...zstd.EOption) func(t *testing.T, w io.Writer) {
		return func(t *testing.T, w io.Writer) {
			w.Write(append(bytes.Clone(backupMagic), backupFormatCompressed, backupKeyCluster))
			zw, err := zstd.NewWriter(w, opts...)
			if err != nil {
				t.Fatal(err)
			}
			block := make([]byte, 1<<20)
			for range 256 {
				zw.Write(block)
			}
			zw.Close()
			w.Write(make([]byte, backupMACSize))
		}
	}
	for _, tc := range []struct {
		name    string
		write   func(t *testing.T, w io.Writer)
		foreign bool
		// maxAlloc bounds what the restore allocates: a few blocks, and
		// the decompressor's window (maxWindow) for a frame that asks it.
		maxAlloc uint64
	}{
		{"plain", large(backupFormat), false, 4 << 20},
		{"compressed", large(backupFormatCompressed), false, 4 << 20},
		{"plain, restored as foreign", large(backupFormat), true, 4 << 20},
		{"compressed, restored as foreign", large(backupFormatCompressed), true, 4 << 20},
		{"compressed, 256 MiB of zeros", zeros(zstd.WithWindowSize(maxWindow)), false, maxWindow + 4<<20},
		{"compressed, 256 MiB of zeros in a small window", zeros(zstd.WithWindowSize(1 << 20)), false, 4 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.CreateTemp(t.TempDir(), "large")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tc.write(t, f)
			size, _ := f.Seek(0, io.SeekEnd)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err = n.RestoreFrom(io.NewSectionReader(f, 0, size), RestoreOptions{Foreign: tc.foreign, By: fsm.RootKeyID})
			runtime.ReadMemStats(&after)
			if !errors.Is(err, fsm.ErrCorruptSnapshot) {
				t.Fatalf("restore: %v; want it refused as damaged", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("the restore of %d KiB allocated %d KiB: %v", size>>10, alloc>>10, err)
			if alloc > tc.maxAlloc {
				t.Fatalf("the restore allocated %d MiB; want it read as a stream", alloc>>20)
			}
		})
	}
}

// TestForeignCompressedBackupRestores: another cluster's compressed
// backup of a few thousand links (its frames declare the encoder's whole
// window, far more than the backup's size) restores with Foreign, and
// without it is refused as made elsewhere, not as damaged.
func TestForeignCompressedBackupRestores(t *testing.T) {
	t.Parallel()
	n := openKeyed(t, newClusterKey(t))
	other := openKeyed(t, newClusterKey(t))
	createURL(t, other, "https://example.com/first") // once it leads
	bulk := make([]fsm.CreateRequest, 5000)
	for i := range bulk {
		bulk[i] = fsm.CreateRequest{URL: fmt.Sprintf("https://example.com/bulk/%d", i), Workspace: "default", CodeLength: 7}
	}
	if _, _, err := other.ProposeCreates(context.Background(), bulk).Wait(); err != nil {
		t.Fatalf("bulk creates: %v", err)
	}
	backup := compressedBackupOf(t, other)
	t.Logf("a compressed backup of %d bytes", len(backup))
	if err := n.Restore(backup, RestoreOptions{By: fsm.RootKeyID}); !errors.Is(err, ErrBackupUnauthenticated) {
		t.Fatalf("without Foreign: %v; want ErrBackupUnauthenticated", err)
	}
	if err := n.Restore(backup, RestoreOptions{Foreign: true, By: fsm.RootKeyID}); err != nil {
		t.Fatalf("with Foreign: %v", err)
	}
	if got := n.FSM().Len(); got < len(bulk) {
		t.Fatalf("%d links after the restore, want the backup's %d", got, len(bulk))
	}
}
