package input

import (
	"testing"

	"github.com/linkraft/linkraft/fsm"
)

func TestPrepared(t *testing.T) {
	ok := fsm.CreateRequest{URL: "https://example.com/a", Workspace: "default", CodeLength: 7}
	with := func(change func(*fsm.CreateRequest)) fsm.CreateRequest {
		r := ok
		change(&r)
		return r
	}
	tests := []struct {
		name         string
		req          fsm.CreateRequest
		allowPrivate bool
		ok           bool
	}{
		{"as httpd prepares it", ok, false, true},
		{"javascript", with(func(r *fsm.CreateRequest) { r.URL = "javascript:alert(1)" }), false, false},
		{"private target", with(func(r *fsm.CreateRequest) { r.URL = "http://10.0.0.1/" }), false, false},
		{"private target allowed", with(func(r *fsm.CreateRequest) { r.URL = "http://10.0.0.1/" }), true, true},
		{"whitespace", with(func(r *fsm.CreateRequest) { r.URL = " https://example.com/a" }), false, false},
		{"custom code", with(func(r *fsm.CreateRequest) { r.CustomCode = "my-code" }), false, true},
		{"custom code syntax", with(func(r *fsm.CreateRequest) { r.CustomCode = "a b" }), false, false},
		{"workspace", with(func(r *fsm.CreateRequest) { r.Workspace = "" }), false, false},
		{"dedupe", with(func(r *fsm.CreateRequest) { r.Dedupe, r.Canonical = true, "https://example.com/a" }), false, true},
		{"hash", with(func(r *fsm.CreateRequest) {
			r.Strategy, r.Dedupe, r.Canonical = fsm.StrategyHash, true, "https://example.com/a"
		}), false, true},
		{"forged canonical", with(func(r *fsm.CreateRequest) { r.Dedupe, r.Canonical = true, "https://other.example/" }), false, false},
		{"country rule", with(func(r *fsm.CreateRequest) {
			r.Options = &fsm.Options{Rules: []fsm.Rule{{Country: "DE", URL: "https://example.com/de"}}}
		}), false, true},
		{"country rule in lower case", with(func(r *fsm.CreateRequest) {
			r.Options = &fsm.Options{Rules: []fsm.Rule{{Country: "de", URL: "https://example.com/de"}}}
		}), false, false},
		{"country rule not a code", with(func(r *fsm.CreateRequest) {
			r.Options = &fsm.Options{Rules: []fsm.Rule{{Country: "DEU", URL: "https://example.com/de"}}}
		}), false, false},
		{"canonical without dedupe", with(func(r *fsm.CreateRequest) { r.Canonical = "https://example.com/a" }), false, false},
	}
	for _, tt := range tests {
		if err := Prepared(tt.req, tt.allowPrivate); (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
