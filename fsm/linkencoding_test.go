package fsm

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

func TestEncodedLinksRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		link Link
	}{
		{"no fields", Link{}},
		{"a plain link", Link{ID: 1, Code: "abc1234", URL: "https://example.com/", Workspace: "default", CreatedAt: 1700000000000}},
		{"every field", Link{
			ID: 7, Code: "go", Domain: "go.example", URL: "https://example.com/a", Workspace: "w", Canonical: "https://example.com/a",
			CreatedAt: 1700000000000, ExpiresAt: 1800000000000, Clicks: 12, LastAccess: 1700000000500,
			Options: &Options{Title: "t", Tags: []string{"a", "b"}, MaxVisits: 5, ValidSince: -1, PasswordHash: "$2a$hash",
				ForwardQuery: true, PublicStats: true,
				Rules:   []Rule{{Device: DeviceAndroid, Language: "en", Query: []QueryParam{{"q", "1"}}, Country: "DE", After: 1, Before: 2, URL: "https://example.com/r"}},
				History: []Version{{URL: "https://example.com/old", ChangedAt: 3, KeyID: "k"}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeLink(EncodeLink(tt.link))
			if err != nil || !reflect.DeepEqual(got, tt.link) {
				t.Fatalf("decoded %+v (%v), want %+v", got, err, tt.link)
			}
		})
	}
}

// TestEncodedLinksOfOlderVersions: a link is written in the oldest version
// that holds it, so that a server of an older build reads every link a
// cluster not yet raised can hold: version 3 only for a link with an
// author (from LevelTargets on), 2 only for options of LevelVisitRows.
func TestEncodedLinksOfOlderVersions(t *testing.T) {
	plain := Link{ID: 1, Code: "abc", URL: "https://example.com/", Workspace: "w"}
	authored := plain
	authored.Author = "k1"
	extended := plain
	extended.Options = &Options{Crawlable: true}
	for _, tt := range []struct {
		name    string
		link    Link
		version byte
	}{
		{"plain", plain, linkEncodingV1},
		{"options of LevelVisitRows", extended, linkEncodingV2},
		{"an author", authored, linkEncodingV3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			encoded := EncodeLink(tt.link)
			if v := encoded[0] &^ sealedFlag; v != tt.version {
				t.Fatalf("written as version %d, want %d", v, tt.version)
			}
			got, err := DecodeLink(encoded)
			if err != nil || !reflect.DeepEqual(got, tt.link) {
				t.Fatalf("decoded %+v (%v), want %+v", got, err, tt.link)
			}
		})
	}
}

// TestEncodedLinksRefuseWhatTheyDidNotWrite: a link with any bit changed,
// cut short, with trailing bytes, without its seal or of an unknown
// version does not decode.
func TestEncodedLinksRefuseWhatTheyDidNotWrite(t *testing.T) {
	l := Link{ID: 7, Code: "go", URL: "https://example.com/a", Workspace: "w", CreatedAt: 5, Options: &Options{Title: "t"}}
	encoded := EncodeLink(l)
	fields := encoded[:len(encoded)-sealedBytes]
	resealed := func(b []byte) []byte { return seal(bytes.Clone(b)) }
	tests := map[string][]byte{
		"empty":          nil,
		"cut short":      encoded[:len(encoded)-1],
		"trailing bytes": resealed(append(bytes.Clone(fields), 0)),
		"fields missing": resealed(fields[:len(fields)-1]),
		"unsealed":       append([]byte{fields[0] &^ sealedFlag}, fields[1:]...),
		"version 2":      resealed(append([]byte{2}, fields[1:]...)),
		"a log entry":    DeleteCommand{Code: "go", Now: 1}.Encode(),
	}
	for i := range encoded {
		for bit := range 8 {
			changed := bytes.Clone(encoded)
			changed[i] ^= 1 << bit
			tests[fmt.Sprintf("byte %d bit %d", i, bit)] = changed
		}
	}
	for name, data := range tests {
		if got, err := DecodeLink(data); err == nil {
			t.Errorf("%s: decoded %+v", name, got)
		}
	}
}

// TestLevelWireWritesNoEntry: LevelWire is about messages between nodes,
// LevelRestoreAudit about what a snapshot may hold; no entry needs either
// (the entries of LevelBounds skip both), and this build reports both.
func TestLevelWireWritesNoEntry(t *testing.T) {
	for name, cmd := range everyCommand() {
		if level := RequiredLevel(cmd.Encode()); level == LevelWire || level == LevelRestoreAudit {
			t.Errorf("%s needs level %d", name, level)
		}
	}
	if EntryLevel < LevelRestoreAudit || LevelRestoreAudit <= LevelWire {
		t.Errorf("this build reports level %d, want at least LevelRestoreAudit, above LevelWire", EntryLevel)
	}
}
