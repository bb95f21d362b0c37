package wire

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

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
// wire as the same sentinel error with the same message, and has one
// status.
func TestRefusalsKeepTheirIdentity(t *testing.T) {
	tests := []struct {
		err    error
		kind   string
		status int
	}{
		{fsm.ErrCodeTaken, KindCodeTaken, http.StatusConflict},
		{fsm.ErrReserved, KindReserved, http.StatusConflict},
		{fsm.ErrHashCollision, KindHashCollision, http.StatusServiceUnavailable},
		{fsm.ErrRequestIDReused, KindRequestIDReused, http.StatusUnprocessableEntity},
		{fsm.ErrCodeSpaceExhausted, KindCodeSpaceExhausted, http.StatusServiceUnavailable},
		{fsm.ErrInvalidRequest, KindInvalid, http.StatusBadRequest},
		{fmt.Errorf("%w: code length 12", fsm.ErrInvalidRequest), KindInvalid, http.StatusBadRequest},
		{fsm.ErrNotInitialized, KindNotInitialized, http.StatusServiceUnavailable},
		{errors.New("disk on fire"), KindFailed, http.StatusInternalServerError},
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
		status, refused := StatusOf(back)
		if status != tt.status || refused != (tt.kind != KindFailed) {
			t.Errorf("%v: status %d (refusal %v), want %d", tt.err, status, refused, tt.status)
		}
		if tt.kind != KindFailed && !errors.Is(back, tt.err) && !errors.Is(tt.err, errors.Unwrap(back)) {
			t.Errorf("%v: the relayed error is not the same sentinel", tt.err)
		}
	}
}

func TestPeersAreDialledFromTheNodesOwnLoopbackAddress(t *testing.T) {
	tests := []struct {
		peer  string
		local string
		want  string // "" for the system's choice
	}{
		{"127.0.0.12:8080", "127.0.0.11", "127.0.0.11:0"},
		{"127.0.0.12:8080", "10.0.0.1", ""},
		{"10.0.0.2:8080", "10.0.0.1", ""},
		{"10.0.0.2:8080", "127.0.0.11", ""},
		{"node2.example:8080", "127.0.0.11", ""},
		{"127.0.0.12:8080", "", ""},
		{"[::1]:8080", "::1", "[::1]:0"},
	}
	for _, tt := range tests {
		got := sourceAddr(tt.peer, net.ParseIP(tt.local))
		if (got == nil) != (tt.want == "") || got != nil && got.String() != tt.want {
			t.Errorf("dialling %s from %s: source %v, want %q", tt.peer, tt.local, got, tt.want)
		}
	}
}
