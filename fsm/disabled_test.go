package fsm

import (
	"bytes"
	"slices"
	"testing"
)

// The times of the disabled-link tests: links are written at writeAt,
// and the purge removes what expired before purgeAt, a day and more
// later.
const (
	writeAt = 10_000
	purgeAt = 10_000_000
)

// expiryEdit is an edit of a link's expiry alone at now; 0 removes it.
func expiryEdit(code string, now, at int64) []byte {
	return EditCommand{Code: code, Now: now, Fields: EditExpiresAt, ExpiresAt: at}.Encode()
}

// raisedTo is a state with its key, raised to level (not raised at 0).
func raisedTo(t *testing.T, level int) *FSM {
	t.Helper()
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode())
	if level > 0 {
		applyAll(t, f, RaiseCommand{To: level}.Encode())
	}
	return f
}

// TestDisabledLinksOutliveThePurge: from LevelDisabled on, a link whose
// expiry its create or edit set at or before the entry's own time is
// disabled on purpose, and the purge of expired links keeps it (Shlink's
// past validUntil: CreateShortUrlTest::createsShortUrlWithValidUntil,
// EditShortUrlTest::metadataCanBeReset); an edit to a later expiry or to
// none enables it, and a link that expires as time passes is purged as
// before. Below the level every link that expired is purged, as older
// builds purge it.
func TestDisabledLinksOutliveThePurge(t *testing.T) {
	for _, c := range []struct {
		name string
		// then writes after the link "l" was created at writeAt with
		// expiry (0: none).
		expiry int64
		then   [][]byte
		kept   bool // at LevelDisabled; below it, kept only while unexpired
		below  bool
	}{
		{name: "created with a past expiry", expiry: writeAt - 1, kept: true},
		{name: "created expiring at its own time", expiry: writeAt, kept: true},
		{name: "created expiring later, which passes", expiry: writeAt + 1},
		{name: "created without expiry", kept: true, below: true},
		{name: "edited to a past expiry", expiry: writeAt + 50,
			then: [][]byte{expiryEdit("l", writeAt+10, writeAt+5)}, kept: true},
		{name: "edited to expire at the edit's time", expiry: writeAt + 50,
			then: [][]byte{expiryEdit("l", writeAt+10, writeAt+10)}, kept: true},
		{name: "edited after expiring to another past expiry", expiry: writeAt + 50,
			then: [][]byte{expiryEdit("l", writeAt+100, writeAt+60)}, kept: true},
		{name: "disabled, then edited to a later expiry that passes", expiry: writeAt - 1,
			then: [][]byte{expiryEdit("l", writeAt+10, writeAt+20)}},
		{name: "disabled, then edited to no expiry", expiry: writeAt - 1,
			then: [][]byte{expiryEdit("l", writeAt+10, 0)}, kept: true, below: true},
		{name: "disabled, enabled without expiry, then given one that passes", expiry: writeAt - 1,
			then: [][]byte{expiryEdit("l", writeAt+10, 0), expiryEdit("l", writeAt+20, writeAt+30)}},
		{name: "disabled, then its title edited", expiry: writeAt - 1,
			then: [][]byte{EditCommand{Code: "l", Now: writeAt + 10, Fields: EditTitle, Title: "still off"}.Encode()},
			kept: true},
	} {
		for _, level := range []int{0, LevelTargets, LevelDisabled} {
			f := raisedTo(t, level)
			applyAll(t, f, create(writeAt, CreateRequest{URL: "https://example.com/l", CustomCode: "l", ExpiresAt: c.expiry}))
			for _, r := range applyAll(t, f, c.then...) {
				if err, ok := r.(error); ok {
					t.Fatalf("%s at level %d: %v", c.name, level, err)
				}
			}
			purge := PurgeCommand{ExpiredBefore: purgeAt}
			want := c.below
			if level >= LevelDisabled {
				want = c.kept
			}
			if got := f.NeedsPurge(purge); got == want {
				t.Errorf("%s at level %d: NeedsPurge %v, want %v", c.name, level, got, !want)
			}
			applyAll(t, f, purge.Encode())
			if _, ok := f.Get("l"); ok != want {
				t.Errorf("%s at level %d: the link is kept: %v, want %v", c.name, level, ok, want)
			}
		}
	}
}

// disabledState is a state raised to LevelDisabled with a link disabled
// on purpose ("off"), one that expired as time passed ("gone") and one
// without expiry ("on").
func disabledState(t *testing.T) *FSM {
	t.Helper()
	f := raisedTo(t, LevelDisabled)
	applyAll(t, f, create(writeAt,
		CreateRequest{URL: "https://example.com/off", CustomCode: "off", ExpiresAt: writeAt - 1},
		CreateRequest{URL: "https://example.com/gone", CustomCode: "gone", ExpiresAt: writeAt + 1},
		CreateRequest{URL: "https://example.com/on", CustomCode: "on"}))
	return f
}

// kept is the codes of "off", "gone" and "on" that f holds.
func kept(f *FSM) []string {
	var codes []string
	for _, code := range []string{"off", "gone", "on"} {
		if _, ok := f.Get(code); ok {
			codes = append(codes, code)
		}
	}
	return codes
}

// TestDisabledSurvivesSnapshots: a state raised to LevelDisabled is
// written in version 13, with the flag, and restores to the same bytes;
// the restored state's purge keeps the disabled link as the original's
// does.
func TestDisabledSurvivesSnapshots(t *testing.T) {
	f := disabledState(t)
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV13 {
		t.Fatalf("version %d, want %d", v, snapshotV13)
	}
	g := roundTrip(t, f)
	purge := PurgeCommand{ExpiredBefore: purgeAt}.Encode()
	applyAll(t, f, purge)
	applyAll(t, g, purge)
	if got, want := kept(g), []string{"off", "on"}; !slices.Equal(got, want) || !slices.Equal(kept(f), want) {
		t.Fatalf("after the purge the restored state keeps %v, the original %v; want %v", got, kept(f), want)
	}
	if !bytes.Equal(snapshotBytes(t, f), snapshotBytes(t, g)) {
		t.Error("after the same purge, the restored state's snapshot differs")
	}
}

// TestOlderSnapshotsRestoreWithoutDisabled: a state below LevelDisabled
// writes version 12, which restores, and the link whose create set a past
// expiry there is purged as any expired link: no older build kept it.
// Raising the restored state afterwards flags nothing already written.
func TestOlderSnapshotsRestoreWithoutDisabled(t *testing.T) {
	f := raisedTo(t, LevelTargets)
	applyAll(t, f, create(writeAt,
		CreateRequest{URL: "https://example.com/off", CustomCode: "off", ExpiresAt: writeAt - 1},
		CreateRequest{URL: "https://example.com/on", CustomCode: "on"}))
	if v := snapshotBytes(t, f)[len(snapshotMagic)]; v != snapshotV12 {
		t.Fatalf("version %d, want %d", v, snapshotV12)
	}
	g := roundTrip(t, f)
	applyAll(t, g, RaiseCommand{To: LevelDisabled}.Encode(), PurgeCommand{ExpiredBefore: purgeAt}.Encode())
	if got := kept(g); !slices.Equal(got, []string{"on"}) {
		t.Fatalf("kept %v, want [on]", got)
	}
}

// TestDisabledIsDeterministic: the same entries, applied in one batch or
// one at a time, give the same bytes, the flags included.
func TestDisabledIsDeterministic(t *testing.T) {
	cmds := [][]byte{
		InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelDisabled}.Encode(),
		create(writeAt, CreateRequest{URL: "https://example.com/off", CustomCode: "off", ExpiresAt: writeAt - 1},
			CreateRequest{URL: "https://example.com/gone", CustomCode: "gone", ExpiresAt: writeAt + 1}),
		expiryEdit("gone", writeAt+5, writeAt+2),
		expiryEdit("off", writeAt+6, writeAt+100),
		PurgeCommand{ExpiredBefore: writeAt + 50}.Encode(),
	}
	a, b := New(), New()
	applyAll(t, a, cmds...)
	for _, c := range cmds {
		applyAll(t, b, c)
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("snapshots differ")
	}
	// "gone" was disabled by its edit and kept; "off" was enabled with an
	// expiry that had not passed at the purge.
	if got := kept(a); !slices.Equal(got, []string{"off", "gone"}) {
		t.Fatalf("kept %v, want [off gone]", got)
	}
}

// TestSnapshotDisabledFlagChecked: a restore refuses a link flagged
// disabled in a state not raised to LevelDisabled (no build writes it),
// and one flagged without an expiry (no entry makes it).
func TestSnapshotDisabledFlagChecked(t *testing.T) {
	for _, c := range []struct {
		name    string
		raised  int
		expires int64
		ok      bool
	}{
		{"raised, with an expiry", LevelDisabled, writeAt, true},
		{"below the level", LevelTargets, writeAt, false},
		{"without an expiry", LevelDisabled, 0, false},
	} {
		l := snapLink{r: record{id: 1, expiresAt: c.expires}, code: "off", url: "https://example.com/", ws: "default",
			flags: snapDisabled}
		if err := l.check(0, 1, c.raised); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}
