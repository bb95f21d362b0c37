package fsm

import (
	"bytes"
	"errors"
	"testing"
)

func TestCheckTarget(t *testing.T) {
	tests := []struct {
		url string
		// below is the answer of a state below LevelTargets, at the
		// answer of one raised to it: nil, ErrInvalidRequest or
		// ErrNotRaised.
		below, at error
	}{
		{"https://example.com/", nil, nil},
		{"http://example.com/a?b=c#d", nil, nil},
		{"HTTPS://EXAMPLE.COM/page", nil, nil},
		{"https://example.com/ünïcode", nil, nil},
		// Safe schemes an older build refuses: only once raised.
		{"mailto:foo@example.com", ErrNotRaised, nil},
		{"tel:+15551234567", ErrNotRaised, nil},
		{"sms:+15551234567?body=hi", ErrNotRaised, nil},
		{"shlink://some/path", ErrNotRaised, nil},
		{"fb://profile/33138223345", ErrNotRaised, nil},
		{"MailTo:foo@example.com", ErrNotRaised, nil},
		// Never, at any level.
		{"javascript:alert(document.domain)", ErrInvalidRequest, ErrInvalidRequest},
		{"JavaScript://example.com/%0aalert(1)", ErrInvalidRequest, ErrInvalidRequest},
		{"vbscript:msgbox(1)", ErrInvalidRequest, ErrInvalidRequest},
		{"data:text/html,<script>alert(1)</script>", ErrInvalidRequest, ErrInvalidRequest},
		{"file:///etc/passwd", ErrInvalidRequest, ErrInvalidRequest},
		{"blob:https://example.com/0d5e", ErrInvalidRequest, ErrInvalidRequest},
		{"view-source:https://example.com/", ErrInvalidRequest, ErrInvalidRequest},
		{"intent://scan/#Intent;scheme=zxing;end", ErrInvalidRequest, ErrInvalidRequest},
		{"ms-msdt:/id PCWDiagnostic", ErrInvalidRequest, ErrInvalidRequest},
		{"ftp://example.com/", ErrInvalidRequest, ErrInvalidRequest},
		{"https:", ErrInvalidRequest, ErrInvalidRequest},
		{"https:example.com", ErrInvalidRequest, ErrInvalidRequest},
		{"http//example.com", ErrInvalidRequest, ErrInvalidRequest},
		{"mailto:", ErrInvalidRequest, ErrInvalidRequest},
		{"//example.com/", ErrInvalidRequest, ErrInvalidRequest},
		{"1app://x", ErrInvalidRequest, ErrInvalidRequest},
		{"https://example.com/\r\nSet-Cookie: a=b", ErrInvalidRequest, ErrInvalidRequest},
		{"mailto:a@example.com\r\nSet-Cookie: a=b", ErrInvalidRequest, ErrInvalidRequest},
		{"https://example.com/\x00", ErrInvalidRequest, ErrInvalidRequest},
		{"https://example.com/\ttab", ErrInvalidRequest, ErrInvalidRequest},
		{"https://example.com/\x7f", ErrInvalidRequest, ErrInvalidRequest},
		{"", ErrInvalidRequest, ErrInvalidRequest},
	}
	for _, tt := range tests {
		for _, level := range []struct {
			raised int
			want   error
		}{{0, tt.below}, {LevelRename, tt.below}, {LevelTargets, tt.at}} {
			err := checkTarget(tt.url, level.raised)
			if level.want == nil && err != nil || level.want != nil && !errors.Is(err, level.want) {
				t.Errorf("checkTarget(%q) raised to %d = %v, want %v", tt.url, level.raised, err, level.want)
			}
		}
	}
}

// TestWebhookURLStaysWeb: a webhook's URL is one the leader sends
// requests to; no level takes another scheme.
func TestWebhookURLStaysWeb(t *testing.T) {
	for _, url := range []string{"mailto:a@example.com", "myapp://hook", "javascript:x"} {
		if err := checkWebURL(url); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("checkWebURL(%q) = %v, want ErrInvalidRequest", url, err)
		}
	}
	if err := checkWebURL("https://example.com/hook"); err != nil {
		t.Errorf("checkWebURL of an https URL: %v", err)
	}
}

// TestOtherSchemesOnlyOnceRaised: Apply stores a mailto: target (as a
// link's, an edit's, a rule's and a domain redirect) only in a state
// raised to LevelTargets, where every server applies the same rule, and
// refuses javascript: at every level; both states stay equal to a replay.
func TestOtherSchemesOnlyOnceRaised(t *testing.T) {
	writes := func(url string) [][]byte {
		return [][]byte{
			create(5, CreateRequest{URL: url, Workspace: "default", CodeLength: 7, CustomCode: "mail"}),
			EditCommand{Code: "web", KeyID: RootKeyID, Now: 6, Fields: EditURL, URL: url}.Encode(),
			EditCommand{Code: "web", KeyID: RootKeyID, Now: 7, Fields: EditRules, Rules: []Rule{{Device: DeviceAndroid, URL: url}}}.Encode(),
			DomainCommand{Domain: Domain{Name: "go.example", NotFoundRedirect: url}, By: RootKeyID, Now: 8}.Encode(),
		}
	}
	for _, tc := range []struct {
		url    string
		raised int
		want   error
	}{
		{"mailto:foo@example.com", LevelRename, ErrNotRaised},
		{"mailto:foo@example.com", LevelTargets, nil},
		{"javascript:alert(1)", LevelRename, ErrInvalidRequest},
		{"javascript:alert(1)", LevelTargets, ErrInvalidRequest},
	} {
		cmds := [][]byte{InitCommand{Key: testKey}.Encode(), RaiseCommand{To: tc.raised}.Encode(),
			create(1, CreateRequest{URL: "https://example.com/", Workspace: "default", CodeLength: 7, CustomCode: "web"})}
		cmds = append(cmds, writes(tc.url)...)
		f, replay := New(), New()
		results := applyAll(t, f, cmds...)
		applyAll(t, replay, cmds...)
		for i, r := range results[3:] {
			err, _ := r.(error)
			if res, ok := r.([]CreateResult); ok {
				err = res[0].Err
			}
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("%s raised to %d, write %d: %v, want %v", tc.url, tc.raised, i, err, tc.want)
			}
		}
		l, stored := f.Get("mail")
		if stored != (tc.want == nil) || stored && l.URL != tc.url {
			t.Errorf("%s raised to %d: stored %v (%q)", tc.url, tc.raised, stored, l.URL)
		}
		if !bytes.Equal(snapshotBytes(t, f), snapshotBytes(t, replay)) {
			t.Errorf("%s raised to %d: a replay of the same entries holds another state", tc.url, tc.raised)
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
