package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

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
