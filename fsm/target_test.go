package fsm

import (
	"errors"
	"testing"
)

func TestCheckTarget(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://example.com/", true},
		{"http://example.com/a?b=c#d", true},
		{"HTTPS://EXAMPLE.COM/page", true},
		{"https://example.com/ünïcode", true},
		{"javascript:alert(document.domain)", false},
		{"JavaScript://example.com/%0aalert(1)", false},
		{"data:text/html,<script>alert(1)</script>", false},
		{"ftp://example.com/", false},
		{"https:", false},
		{"http//example.com", false},
		{"https://example.com/\r\nSet-Cookie: a=b", false},
		{"https://example.com/\x00", false},
		{"https://example.com/\ttab", false},
		{"https://example.com/\x7f", false},
		{"", false},
	}
	for _, tt := range tests {
		if err := checkTarget(tt.url); (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("checkTarget(%q) = %v, want ok=%v", tt.url, err, tt.ok)
		}
	}
}

// TestRefusedTargetsChangeNoCode: a create the state machine refuses for
// its target stores nothing and leaves the code the next valid create
// gets as it would have been.
func TestRefusedTargetsChangeNoCode(t *testing.T) {
	plain, attacked := New(), New()
	for _, f := range []*FSM{plain, attacked} {
		applyAll(t, f, InitCommand{Key: testKey}.Encode())
	}
	valid := CreateRequest{URL: "https://example.com/a", Workspace: "default", CodeLength: 7}
	want := createOne(t, plain, 10, valid)
	for _, bad := range []string{"javascript:alert(document.domain)", "https://example.com/\r\nX: y"} {
		r := createOne(t, attacked, 5, CreateRequest{URL: bad, Workspace: "default", CodeLength: 7, CustomCode: "jsx"})
		if !errors.Is(r.Err, ErrInvalidRequest) {
			t.Fatalf("create of %q: %+v, want ErrInvalidRequest", bad, r)
		}
		r = createOne(t, attacked, 5, CreateRequest{URL: bad, Workspace: "default", CodeLength: 7})
		if !errors.Is(r.Err, ErrInvalidRequest) {
			t.Fatalf("create of %q with a generated code: %+v, want ErrInvalidRequest", bad, r)
		}
	}
	if _, ok := attacked.Get("jsx"); ok || attacked.Len() != 0 {
		t.Fatalf("refused creates stored %d links", attacked.Len())
	}
	got := createOne(t, attacked, 10, valid)
	if got.Err != nil || got.Link.Code != want.Link.Code {
		t.Fatalf("the next valid create got %q (%v), want %q as without the refused ones", got.Link.Code, got.Err, want.Link.Code)
	}
}
