package httpd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveTestServer serves s on a loopback listener and returns its base URL.
func serveTestServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	return "http://" + ln.Addr().String()
}

// waitLeader waits until the test server's single node leads.
func waitLeader(t *testing.T, s *Server) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !s.node.Self.IsLeader(); {
		if time.Now().After(deadline) {
			t.Fatal("the node did not lead")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestImportIsReadAsItIsImported: an import body of many megabytes, sent
// through a pipe, has its first links created while the client still
// holds the rest of the body back; then the whole is imported. A node
// that read the body whole before importing would create nothing until
// the body ended, and the test would stop at its deadline.
func TestImportIsReadAsItIsImported(t *testing.T) {
	s := newTestServer(t, nil)
	base := serveTestServer(t, s)
	waitLeader(t, s)

	const lines = 100_000 // ~14 MB
	pr, pw := io.Pipe()
	// A failing test ends the request, instead of leaving the server
	// waiting for the rest of the body until its read timeout.
	t.Cleanup(func() { pw.CloseWithError(errors.New("the test ended")) })
	req, err := http.NewRequest(http.MethodPost, base+"/admin/import", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/x-ndjson")
	type answer struct {
		resp *http.Response
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req) // chunked: the length is unknown
		answered <- answer{resp, err}
	}()

	write := func(from, to int) {
		var b bytes.Buffer
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, `{"short_code":"str-%06d","original_url":"https://www.example.com/catalogue/products/item-%08d?utm_medium=email&utm_source=newsletter"}`+"\n", i, i)
		}
		if _, err := pw.Write(b.Bytes()); err != nil {
			t.Fatalf("write lines %d-%d: %v", from, to, err)
		}
	}
	// Enough for the first chunks to be cut, parsed and proposed.
	first := 4 * importChunkLines
	write(0, first)
	for deadline := time.Now().Add(20 * time.Second); s.fsm.Len() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no link was created while the body was still being sent")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := first; i < lines; i += 10_000 {
		write(i, min(i+10_000, lines))
	}
	pw.Close()

	a := <-answered
	if a.err != nil {
		t.Fatalf("POST /admin/import: %v", a.err)
	}
	defer a.resp.Body.Close()
	body, _ := io.ReadAll(a.resp.Body)
	if a.resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /admin/import: %d %s", a.resp.StatusCode, body)
	}
	var report importReport
	if err := json.Unmarshal(body, &report); err != nil {
		t.Fatalf("report %s: %v", body, err)
	}
	if report.Created != lines || report.Skipped != 0 || len(report.Failed) != 0 {
		t.Fatalf("report: %d created, %d skipped, %d failed; want %d created", report.Created, report.Skipped, len(report.Failed), lines)
	}
	requireRedirect(t, s, fmt.Sprintf("str-%06d", lines-1), fmt.Sprintf("https://www.example.com/catalogue/products/item-%08d?utm_medium=email&utm_source=newsletter", lines-1))
}

// TestBodiesAreReadWithinTheirLimit: with bodies streamed, readBody gives
// the handlers every other body whole, sized or chunked, larger than what
// fasthttp reads with the header or not, and refuses one over the limit.
func TestBodiesAreReadWithinTheirLimit(t *testing.T) {
	s := newTestServer(t, nil)
	base := serveTestServer(t, s)
	waitLeader(t, s)

	post := func(code string, pad int, chunked bool) (int, string) {
		t.Helper()
		resp, err := postCreate(t, base, `{"url":"https://example.com/`+code+`","custom_code":"`+code+`"`+strings.Repeat(" ", pad)+`}`, chunked)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, c := range []struct {
		pad     int
		chunked bool
		want    int
	}{
		{0, false, 201},
		{0, true, 201},
		{20 << 10, false, 201}, // beyond what fasthttp reads with the header
		{20 << 10, true, 201},
		{maxBodyBytes, false, 413},
		{maxBodyBytes, true, 413},
	} {
		code := fmt.Sprintf("body-%d", i)
		if status, body := post(code, c.pad, c.chunked); status != c.want {
			t.Errorf("create with %d bytes of padding (chunked %v): %d %s, want %d", c.pad, c.chunked, status, body, c.want)
		}
	}
	// The connection is still usable after each of them.
	if status, body := post("body-after", 0, false); status != 201 {
		t.Errorf("create after: %d %s", status, body)
	}
}

// TestRefusedBodyAnswerReachesTheClient: a client that sends a body well
// over the limit, of a known length or chunked, gets the 413, not a reset
// connection. The node answers before it has read the body and closes the
// connection; closed with the client's bytes unread, it would answer what
// the client still sends with a reset, and a client that is still writing
// (Go's, here) reports the reset instead of the answer.
func TestRefusedBodyAnswerReachesTheClient(t *testing.T) {
	s := newTestServer(t, nil)
	base := serveTestServer(t, s)
	waitLeader(t, s)
	body := strings.Repeat("x", 16*maxBodyBytes)
	for _, chunked := range []bool{false, true} {
		for try := range 10 {
			resp, err := postCreate(t, base, body, chunked)
			if err != nil {
				t.Fatalf("chunked %v, try %d: %v", chunked, try, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("chunked %v, try %d: %d, want 413", chunked, try, resp.StatusCode)
			}
		}
	}
}

// postCreate posts body to base's create route with the operator's
// token, with its length or, chunked, without.
func postCreate(t *testing.T, base, body string, chunked bool) (*http.Response, error) {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length: net/http sends it chunked
	}
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/urls", r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}
