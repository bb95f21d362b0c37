package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/linkraft/linkraft/fsm"
)

func TestDecodeChecksVersion(t *testing.T) {
	tests := []struct {
		body string
		ok   bool
	}{
		{`{"v":1,"index":7}`, true},
		{`{"index":7}`, false}, // no version: not this protocol
		{`{"v":2,"index":7}`, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		var answer ReadIndexAnswer
		if err := Decode([]byte(tt.body), &answer); (err == nil) != tt.ok {
			t.Errorf("decode %s: err %v, want ok=%v", tt.body, err, tt.ok)
		}
	}
}

// TestRefusalsKeepTheirIdentity: every state machine refusal crosses the
// wire as the same sentinel error with the same message.
func TestRefusalsKeepTheirIdentity(t *testing.T) {
	tests := []struct {
		err  error
		kind string
	}{
		{fsm.ErrCodeTaken, KindCodeTaken},
		{fsm.ErrReserved, KindReserved},
		{fsm.ErrHashCollision, KindHashCollision},
		{fsm.ErrRequestIDReused, KindRequestIDReused},
		{fsm.ErrCodeSpaceExhausted, KindCodeSpaceExhausted},
		{fsm.ErrStateFull, KindStateFull},
		{fsm.ErrInvalidRequest, KindInvalid},
		{fmt.Errorf("%w: code length 12", fsm.ErrInvalidRequest), KindInvalid},
		{fsm.ErrNotInitialized, KindNotInitialized},
		{errors.New("disk on fire"), KindFailed},
	}
	for _, tt := range tests {
		kind := KindOf(tt.err)
		if kind != tt.kind {
			t.Errorf("%v: kind %q, want %q", tt.err, kind, tt.kind)
		}
		back := RefusalOf(kind, tt.err.Error())
		if back.Error() != tt.err.Error() {
			t.Errorf("%v came back as %v", tt.err, back)
		}
		if tt.kind != KindFailed && !errors.Is(back, tt.err) && !errors.Is(tt.err, errors.Unwrap(back)) {
			t.Errorf("%v: the relayed error is not the same sentinel", tt.err)
		}
	}
}

// TestClientCall: what a caller learns from each kind of outcome.
func TestClientCall(t *testing.T) {
	ln := fasthttputil.NewInmemoryListener()
	defer ln.Close()
	go fasthttp.Serve(ln, func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case PathReadIndex:
			if string(ctx.Request.Header.Peek(ForwardedHeader)) != "n1" {
				WriteProblem(ctx, http.StatusBadRequest, "unmarked")
				return
			}
			WriteMessage(ctx, ReadIndexAnswer{V: Version, Index: 42})
		case PathLeave:
			WriteProblem(ctx, http.StatusForbidden, "not yours")
		default:
			WriteProblem(ctx, http.StatusServiceUnavailable, "not the leader")
		}
	})
	up := NewClient("n1", func(string, time.Duration) (net.Conn, error) { return ln.Dial() })
	down := NewClient("n1", func(addr string, _ time.Duration) (net.Conn, error) {
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	var answer ReadIndexAnswer
	if err := up.Call(ctx, "peer:1", "GET", PathReadIndex, nil, &answer); err != nil || answer.Index != 42 {
		t.Fatalf("read index: %+v, %v", answer, err)
	}
	tests := []struct {
		name      string
		c         *Client
		path      string
		status    int // 0: no answer
		refused   bool
		neverSent bool
	}{
		{"refused", up, PathLeave, http.StatusForbidden, true, false},
		{"unavailable", up, PathCreates, http.StatusServiceUnavailable, false, false},
		{"no connection", down, PathReadIndex, 0, false, true},
	}
	for _, tt := range tests {
		err := tt.c.Call(ctx, "peer:1", "GET", tt.path, nil, &answer)
		var status *StatusError
		switch {
		case err == nil:
			t.Errorf("%s: no error", tt.name)
		case tt.status == 0 && errors.As(err, &status):
			t.Errorf("%s: %v is an answer", tt.name, err)
		case tt.status != 0 && (!errors.As(err, &status) || status.Status != tt.status || status.Refused() != tt.refused):
			t.Errorf("%s: %v, want status %d (refused %v)", tt.name, err, tt.status, tt.refused)
		case NeverSent(err) != tt.neverSent:
			t.Errorf("%s: NeverSent(%v) = %v", tt.name, err, !tt.neverSent)
		}
	}
	if err := up.Call(context.Background(), "peer:1", "GET", PathReadIndex, nil, &answer); err == nil {
		t.Error("a call without a deadline was made")
	}
}

func TestReadBody(t *testing.T) {
	for _, tt := range []struct {
		name   string
		body   string
		length int
		want   string
		err    error
	}{
		{"announced length", "0123456789", 10, "0123456789", nil},
		{"empty", "", 0, "", nil},
		{"unknown length: to the end", "0123456789", -1, "0123456789", nil},
		{"unknown length, many pieces", strings.Repeat("0123456789", 350_000), -1, strings.Repeat("0123456789", 350_000), nil},
		{"unknown length, empty", "", -1, "", nil},
		{"shorter than announced", "01234", 10, "", io.ErrUnexpectedEOF},
		{"longer than announced: the rest is not read", "0123456789", 4, "0123", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Reads of a few bytes at a time, as a chunked body arrives.
			got, err := ReadBody(iotest.HalfReader(strings.NewReader(tt.body)), tt.length)
			if !errors.Is(err, tt.err) || (err == nil && string(got) != tt.want) {
				t.Fatalf("ReadBody(%q, %d) = %q, %v; want %q, %v", tt.body, tt.length, got, err, tt.want, tt.err)
			}
		})
	}
}
