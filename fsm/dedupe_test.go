package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm/codes"
)

// raisedToTargets is a state raised to LevelTargets, with the domain
// a.example registered.
func raisedToTargets(t *testing.T) *FSM {
	t.Helper()
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelTargets}.Encode(),
		DomainCommand{Domain: Domain{Name: "a.example"}, By: RootKeyID, Now: 1}.Encode())
	return f
}

// mustCreate creates r and fails the test on an error.
func mustCreate(t *testing.T, f *FSM, now int64, r CreateRequest) Link {
	t.Helper()
	res := createOne(t, f, now, r)
	if res.Err != nil {
		t.Fatalf("create %+v: %v", r, res.Err)
	}
	return res.Link
}

// TestDedupeFindsAnyLiveLink: once raised to LevelTargets, a dedupe create
// returns the oldest live link of its canonical URL in its workspace and
// domain that would redirect, whatever made it and whatever its options.
func TestDedupeFindsAnyLiveLink(t *testing.T) {
	const url = "https://Example.com/page/"
	plain := CreateRequest{URL: url}
	cases := []struct {
		name   string
		links  []CreateRequest // created at times 2, 3, …; none with dedupe unless set
		clicks uint64          // clicks on the first link
		req    CreateRequest   // with dedupe, at time 100
		want   int             // the index in links of the link returned; -1: a new link
	}{
		{"a link made without dedupe", []CreateRequest{plain}, 0, CreateRequest{URL: "https://example.com/page"}, 0},
		{"a custom code", []CreateRequest{{URL: url, CustomCode: "mine"}}, 0, CreateRequest{URL: "https://example.com:443/page"}, 0},
		{"an imported link", []CreateRequest{{URL: url, CustomCode: "imp", CreatedAt: 1, Clicks: 5, KeyID: RootKeyID}}, 0, CreateRequest{URL: url}, 0},
		{"a hash link", []CreateRequest{{URL: url, Strategy: StrategyHash}}, 0, CreateRequest{URL: url}, 0},
		{"the oldest of several", []CreateRequest{{URL: "https://example.com/other"}, plain, plain, {URL: url, Dedupe: true}}, 0, CreateRequest{URL: url}, 1},
		{"not across workspaces", []CreateRequest{plain}, 0, CreateRequest{URL: url, Workspace: "other"}, -1},
		{"not across domains", []CreateRequest{plain}, 0, CreateRequest{URL: url, Domain: "a.example"}, -1},
		{"only in its domain", []CreateRequest{plain, {URL: url, Domain: "a.example"}}, 0, CreateRequest{URL: url, Domain: "a.example"}, 1},
		{"not another URL", []CreateRequest{plain}, 0, CreateRequest{URL: "https://example.com/page?x=1"}, -1},
		{"not an expired link", []CreateRequest{{URL: url, ExpiresAt: 50}, plain}, 0, CreateRequest{URL: url}, 1},
		{"not a link past its visit limit", []CreateRequest{{URL: url, Options: &Options{MaxVisits: 2}}, plain}, 2, CreateRequest{URL: url}, 1},
		{"a link short of its visit limit", []CreateRequest{{URL: url, Options: &Options{MaxVisits: 2}}, plain}, 1, CreateRequest{URL: url}, 0},
		{"a link valid since before the create", []CreateRequest{{URL: url, Options: &Options{ValidSince: 100}}}, 0, CreateRequest{URL: url}, 0},
		{"whatever options either sets", []CreateRequest{{URL: url, Options: &Options{Tags: []string{"a"}, PasswordHash: "$2a$hash", Title: "T"}}}, 0,
			CreateRequest{URL: url, ExpiresAt: 500, Options: &Options{Tags: []string{"b"}, MaxVisits: 3, Title: "U"}}, 0},
		{"not a link valid only later", []CreateRequest{{URL: url, Options: &Options{ValidSince: 200}}}, 0, CreateRequest{URL: url}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := raisedToTargets(t)
			var made []Link
			for i, r := range tc.links {
				made = append(made, mustCreate(t, f, int64(2+i), r))
			}
			if tc.clicks > 0 {
				applyAll(t, f, ClickBatch{Node: "n1", Seq: 1, Now: 10, Counts: []ClickCount{{Code: made[0].Code, Count: tc.clicks}}}.Encode())
			}
			tc.req.Dedupe = true
			got := mustCreate(t, f, 100, tc.req)
			if tc.want < 0 {
				for _, l := range made {
					if got.Code == l.Code {
						t.Fatalf("dedupe returned %q, want a new link", got.Code)
					}
				}
				return
			}
			if got.Code != made[tc.want].Code {
				t.Fatalf("dedupe returned %q, want %q (link %d)", got.Code, made[tc.want].Code, tc.want)
			}
		})
	}
}

// TestDedupeOfACustomCodeFindsAnyLink: a dedupe create with a custom code
// returns the link that has it when that link has the URL, whatever made
// it, as Shlink's findIfExists with a customSlug does; another URL keeps
// the code taken.
func TestDedupeOfACustomCodeFindsAnyLink(t *testing.T) {
	f := raisedToTargets(t)
	mine := mustCreate(t, f, 2, CreateRequest{URL: "https://example.com/mine", CustomCode: "mine"})
	for _, tc := range []struct {
		url      string
		existing bool
		err      error
	}{
		{"https://EXAMPLE.com/mine/", true, nil},
		{"https://example.com/yours", false, ErrCodeTaken},
	} {
		res := createOne(t, f, 3, CreateRequest{URL: tc.url, CustomCode: "mine", Dedupe: true})
		if !errors.Is(res.Err, tc.err) || res.Existing != tc.existing || tc.existing && res.Link.Code != mine.Code {
			t.Errorf("%s: %+v, want existing %v, err %v", tc.url, res, tc.existing, tc.err)
		}
	}
}

// TestDedupeFollowsDeletesAndEdits: a deleted link is not found; an edit
// of a target moves the link to its new URL, where it counts by its age.
func TestDedupeFollowsDeletesAndEdits(t *testing.T) {
	const one, two = "https://example.com/one", "https://example.com/two"
	dedupe := func(f *FSM, now int64, url string) CreateResult {
		return createOne(t, f, now, CreateRequest{URL: url, Dedupe: true})
	}
	edit := func(f *FSM, now int64, code, url string) {
		canonical, _ := codes.Canonicalize(url)
		if err, _ := applyAll(t, f, EditCommand{Code: code, Now: now, Fields: EditURL, URL: url, Canonical: canonical}.Encode())[0].(error); err != nil {
			t.Fatalf("edit %s: %v", code, err)
		}
	}
	t.Run("delete", func(t *testing.T) {
		f := raisedToTargets(t)
		a := mustCreate(t, f, 2, CreateRequest{URL: one})
		applyAll(t, f, DeleteCommand{Code: a.Code, Now: 3}.Encode())
		if res := dedupe(f, 4, one); res.Existing {
			t.Fatalf("dedupe returned the deleted %q", res.Link.Code)
		}
	})
	t.Run("edit", func(t *testing.T) {
		f := raisedToTargets(t)
		a := mustCreate(t, f, 2, CreateRequest{URL: one})
		b := mustCreate(t, f, 3, CreateRequest{URL: two})
		edit(f, 4, a.Code, two)
		if res := dedupe(f, 5, two); !res.Existing || res.Link.Code != a.Code {
			t.Fatalf("dedupe of the new target: %+v, want the older, edited %q", res, a.Code)
		}
		applyAll(t, f, DeleteCommand{Code: a.Code, Now: 6}.Encode())
		if res := dedupe(f, 7, two); !res.Existing || res.Link.Code != b.Code {
			t.Fatalf("dedupe after deleting the edited link: %+v, want %q", res, b.Code)
		}
		if res := dedupe(f, 8, one); res.Existing {
			t.Fatalf("dedupe of the old target returned %q", res.Link.Code)
		}
	})
	t.Run("edit of a dedupe link", func(t *testing.T) {
		f := raisedToTargets(t)
		a := mustCreate(t, f, 2, CreateRequest{URL: one, Dedupe: true})
		edit(f, 3, a.Code, two)
		if res := dedupe(f, 4, one); res.Existing {
			t.Fatalf("dedupe of the old target returned %q", res.Link.Code)
		}
		if res := dedupe(f, 5, two); !res.Existing || res.Link.Code != a.Code {
			t.Fatalf("dedupe of the new target: %+v, want %q", res, a.Code)
		}
	})
}

// TestDedupeBeforeTheRaiseKeepsTheOldRule: until the cluster is raised to
// LevelTargets, every node applies the rule older builds apply: only a
// link made with dedupe is found, as a log written before the upgrade
// must replay to the same state.
func TestDedupeBeforeTheRaiseKeepsTheOldRule(t *testing.T) {
	f := New()
	applyAll(t, f, InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelRemovals}.Encode())
	plain := mustCreate(t, f, 2, CreateRequest{URL: "https://example.com/p"})
	if res := createOne(t, f, 3, CreateRequest{URL: "https://example.com/p", Dedupe: true}); res.Existing || res.Link.Code == plain.Code {
		t.Fatalf("before the raise, dedupe returned the plain link: %+v", res)
	}
	first := createOne(t, f, 4, CreateRequest{URL: "https://example.com/q", Dedupe: true})
	if res := createOne(t, f, 5, CreateRequest{URL: "https://example.com/q", Dedupe: true}); !res.Existing || res.Link.Code != first.Link.Code {
		t.Fatalf("before the raise, dedupe of a dedupe link: %+v, want %q", res, first.Link.Code)
	}
	applyAll(t, f, RaiseCommand{To: LevelTargets}.Encode())
	if res := createOne(t, f, 6, CreateRequest{URL: "https://example.com/p", Dedupe: true}); !res.Existing || res.Link.Code != plain.Code {
		t.Fatalf("after the raise: %+v, want the plain %q", res, plain.Code)
	}
}

// targetsWorkload is commands that fill, move and empty target lists.
func targetsWorkload() [][]byte {
	cmds := [][]byte{InitCommand{Key: testKey}.Encode(), RaiseCommand{To: LevelTargets}.Encode()}
	for i := range 30 {
		cmds = append(cmds, create(int64(10+i),
			CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i%4), CustomCode: fmt.Sprintf("c%d", i), ExpiresAt: int64(30 + i%3*100)},
			CreateRequest{URL: fmt.Sprintf("https://example.com/%d/", i%5), Dedupe: true},
		))
		if i%7 == 3 {
			cmds = append(cmds, DeleteCommand{Code: fmt.Sprintf("c%d", i-2), Now: int64(10 + i)}.Encode())
		}
		if i%6 == 5 {
			cmds = append(cmds, EditCommand{Code: fmt.Sprintf("c%d", i-4), Now: int64(10 + i), Fields: EditURL, URL: "https://example.com/3"}.Encode())
		}
	}
	return cmds
}

// dedupeAnswers is the codes dedupe returns for each workload URL at now.
func dedupeAnswers(t *testing.T, f *FSM, now int64) []string {
	var out []string
	for i := range 5 {
		res := createOne(t, f, now, CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), Dedupe: true})
		out = append(out, fmt.Sprint(res.Link.Code, res.Existing))
	}
	return out
}

// TestDedupeTargetsAreDeterministic: the workload applied at once, one
// entry at a time, or restored from a snapshot of it gives the same state,
// a target key for each live link and the same dedupe answers afterwards.
func TestDedupeTargetsAreDeterministic(t *testing.T) {
	a, b := New(), New()
	applyAll(t, a, targetsWorkload()...)
	for _, c := range targetsWorkload() {
		applyAll(t, b, c)
	}
	c := roundTrip(t, a)
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("snapshots differ")
	}
	for name, f := range map[string]*FSM{"at once": a, "one at a time": b, "restored": c} {
		if keys, live := targetKeys(t, f), f.s.links.live(); keys != live {
			t.Fatalf("%s: %d target keys for %d live links", name, keys, live)
		}
	}
	want := dedupeAnswers(t, a, 100)
	if got := dedupeAnswers(t, b, 100); !slices.Equal(got, want) {
		t.Fatalf("one at a time: %v, want %v", got, want)
	}
	if got := dedupeAnswers(t, c, 100); !slices.Equal(got, want) {
		t.Fatalf("restored: %v, want %v", got, want)
	}
	existing := 0
	for _, w := range want {
		if bytes.HasSuffix([]byte(w), []byte("true")) {
			existing++
		}
	}
	if existing < 3 {
		t.Fatalf("the workload left too few links to find: %v", want)
	}
}

// TestOlderSnapshotsRestoreTheTargetIndex: snapshots written by earlier
// builds (testdata/) restore with every link in the target index, so once
// raised, a dedupe create finds a link those builds made without dedupe.
func TestOlderSnapshotsRestoreTheTargetIndex(t *testing.T) {
	for _, tc := range []struct {
		file, url, workspace string
	}{
		{"testdata/snapshot-v1.bin", "https://example.com/7", "default"},
		{"testdata/snapshot-v2.bin", "https://EXAMPLE.com/12/", "default"},
		{"testdata/snapshot-v4.bin", "https://example.com/39", "default"},
		{"testdata/snapshot-v10.bin", "", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			old, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			f := New()
			if err := f.Restore(nopCloser{bytes.NewReader(old)}); err != nil {
				t.Fatalf("restore: %v", err)
			}
			want, ok := findLink(f, tc.url, tc.workspace)
			if !ok {
				t.Fatalf("no link to %q in the snapshot", tc.url)
			}
			applyAll(t, f, RaiseCommand{To: LevelTargets}.Encode())
			res := createOne(t, f, 1<<40, CreateRequest{URL: want.URL, Workspace: want.Workspace, Domain: want.Domain, Dedupe: true})
			if !res.Existing || res.Link.Code != want.Code {
				t.Fatalf("dedupe of %s: %+v, want the restored %q", want.URL, res, want.Code)
			}
		})
	}
}

// findLink is the first link of the state to url's canonical form in
// workspace ("": the state's first link).
func findLink(f *FSM, url, workspace string) (Link, bool) {
	canonical, _ := codes.Canonicalize(url)
	for p := range f.s.links.recs.n {
		r := f.s.links.recs.at(p)
		if !r.live() || r.dedupe() {
			continue
		}
		l := f.s.link(p)
		if c, _ := codes.Canonicalize(l.URL); url == "" || c == canonical && l.Workspace == workspace {
			return l, true
		}
	}
	return Link{}, false
}

// TestTargetKeysStayInOrder: whatever the order of adds, removes and
// marks, a target's scan lists exactly its links, oldest first, with
// their marks, and never a link of a target whose key starts the same
// way (a longer URL, another domain or workspace, a domain and URL split
// elsewhere); its first marked link is found, from the memo or not.
func TestTargetKeysStayInOrder(t *testing.T) {
	type target struct {
		ws                uint32
		domain, canonical string
	}
	targets := []target{
		{0, "", "https://example.com/x"},
		{0, "", "https://example.com/xy"},
		{0, "a.example", "https://example.com/x"},
		{1, "", "https://example.com/x"},
		{0, "a", "b"},
		{0, "ab", ""},
	}
	es := engines{}
	eng := es.open()
	defer eng.release()
	ti := newTargetIndex(eng)
	type entry struct {
		target  int
		indexed bool
	}
	in := map[uint32]entry{}
	// A fixed pseudo-random walk over 300 positions (keys of a position
	// 255 and 256 differ in two bytes; from the 150th on they are past 32
	// bits, and longer), each with a target of its own, marked indexed or
	// not.
	at := func(i uint32) uint64 {
		if i < 150 {
			return uint64(i)
		}
		return longPosition - 150 + uint64(i)
	}
	x := uint32(1)
	for step := range 5000 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p := x % 300
		if e, ok := in[p]; ok && x&(1<<20) == 0 {
			tg := targets[e.target]
			ti.remove(at(p), tg.ws, tg.domain, tg.canonical)
			delete(in, p)
		} else {
			if !ok {
				e.target = int(x>>9) % len(targets)
			}
			e.indexed = x&(1<<21) != 0
			tg := targets[e.target]
			ti.add(at(p), tg.ws, tg.domain, tg.canonical, e.indexed)
			in[p] = e
		}
		// The first link marked, looked up at every step: the memo of
		// the last lookup must follow every add, mark and remove.
		k := step / 10 % len(targets) // ten steps each: the memo is hit
		var want uint64
		found := false
		for q := range uint32(300) {
			if e, ok := in[q]; ok && e.target == k && e.indexed {
				want, found = at(q), true
				break
			}
		}
		tg := targets[k]
		if got, ok := ti.indexedOf(tg.ws, tg.domain, tg.canonical); got != want || ok != found {
			t.Fatalf("step %d, target %+v: indexed %d %v, want %d %v", step, tg, got, ok, want, found)
		}
		if step%50 != 0 {
			continue
		}
		for k, tg := range targets {
			var want, got []entry
			for q := range uint32(300) {
				if e, ok := in[q]; ok && e.target == k {
					want = append(want, entry{int(at(q)), e.indexed})
				}
			}
			for q, indexed := range ti.links(tg.ws, tg.domain, tg.canonical) {
				got = append(got, entry{int(q), indexed})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d, target %+v: links %v, want %v", step, tg, got, want)
			}
		}
		// A walk of the whole table splits each key at its lengths: a
		// link marked twice under one target is found, whatever its
		// position's length.
		marked := map[int][]uint64{}
		for q, e := range in {
			if e.indexed {
				marked[e.target] = append(marked[e.target], at(q))
			}
		}
		twice, found := ti.indexedTwice()
		foundTwice := false
		for _, ps := range marked {
			foundTwice = foundTwice || len(ps) > 1 && found && slices.Contains(ps, twice)
		}
		if wanted := slices.ContainsFunc(slices.Collect(maps.Values(marked)), func(ps []uint64) bool { return len(ps) > 1 }); found != wanted || found && !foundTwice {
			t.Fatalf("step %d: indexedTwice = %d, %v; marked %v", step, twice, found, marked)
		}
	}
	if eng.err != nil {
		t.Fatal(eng.err)
	}
	// Two links marked under one target, both past 32 bits: the walk of
	// the whole table finds the second.
	other := es.open()
	defer other.release()
	long := newTargetIndex(other)
	long.add(longPosition+5, 0, "", "https://example.com/long", true)
	long.add(longPosition+9, 0, "", "https://example.com/long", true)
	if p, ok := long.indexedTwice(); !ok || p != longPosition+9 {
		t.Fatalf("indexedTwice of two long positions under one target: %d, %v", p, ok)
	}
}

// TestDedupeFindsALinkOfTheSameBatch: the target index is written through
// the apply batch, so a dedupe create finds a link an earlier entry of
// the same Raft batch created, or an earlier item of the same create
// batch, and a later entry no longer finds a link deleted before it.
func TestDedupeFindsALinkOfTheSameBatch(t *testing.T) {
	const url = "https://example.com/same-batch"
	f := raisedToTargets(t)
	logs := []*raft.Log{
		{Index: 10, Type: raft.LogCommand, Data: create(2, CreateRequest{URL: url, CustomCode: "first"})},
		{Index: 11, Type: raft.LogCommand, Data: create(3, CreateRequest{URL: url, CustomCode: "second"},
			CreateRequest{URL: url, Dedupe: true})},
		{Index: 12, Type: raft.LogCommand, Data: DeleteCommand{Code: "first", Now: 4}.Encode()},
		{Index: 13, Type: raft.LogCommand, Data: create(5, CreateRequest{URL: url, Dedupe: true})},
	}
	res := f.ApplyBatch(logs)
	if got := res[1].([]CreateResult)[1]; !got.Existing || got.Link.Code != "first" {
		t.Fatalf("dedupe in the batch that created the link: %+v, want the existing \"first\"", got)
	}
	if got := res[3].([]CreateResult)[0]; !got.Existing || got.Link.Code != "second" {
		t.Fatalf("dedupe after the delete in the same batch: %+v, want the existing \"second\"", got)
	}
	if n := targetKeys(t, f); n != 1 {
		t.Fatalf("%d target keys for one live link", n)
	}
}

// targetKeys counts the engine's target keys, checking that each is one
// of a live link under its target.
func targetKeys(t *testing.T, f *FSM) int {
	t.Helper()
	n := 0
	f.s.eng.scan([]byte{targetPrefix}, nil, func(key, _ []byte) bool {
		p, ok := positionFrom(key[max(targetPrefixLen(key), 0):])
		if !ok {
			t.Fatalf("target key %x holds no position", key)
		}
		if r := f.s.links.recs.at(p); !r.live() {
			t.Fatalf("target key %x of the dead link at %d", key, p)
		}
		ws, domain, canonical := f.s.links.targetKey(p)
		if want := appendPosition(targetPrefixKey(nil, ws, domain, canonical), p); !bytes.Equal(key, want) {
			t.Fatalf("target key %x of the link at %d, want %x", key, p, want)
		}
		n++
		return true
	})
	return n
}

// TestRestoreRefusesTwoIndexedLinksOfATarget: a links section may mark
// one dedupe link per workspace, domain and canonical URL as the one
// dedupe returns (the rule before LevelTargets), as Apply keeps it; a
// restore refuses two, which it checks once the links are in.
func TestRestoreRefusesTwoIndexedLinksOfATarget(t *testing.T) {
	type link struct {
		code, url, ws string
		flags         byte
	}
	const dedupe, indexed = snapDedupe, snapDedupe | snapIndexed
	section := func(links ...link) []byte {
		var e encoder
		e.uvarint(uint64(len(links)))
		for i, l := range links {
			e.uvarint(uint64(i + 1))
			e.string(l.code)
			e.string(l.url)
			e.string(l.ws)
			e.string("")
			e.byte(l.flags)
			e.varint(1)
			e.varint(0)
			e.uvarint(0)
			e.varint(0)
		}
		return e.buf
	}
	const a, b = "https://example.com/a", "https://example.com/b"
	for _, c := range []struct {
		name  string
		links []link
		ok    bool
	}{
		{"one indexed link a URL", []link{{"x", a, "w", indexed}, {"y", b, "w", indexed}, {"z", a, "w", dedupe}}, true},
		{"one a workspace", []link{{"x", a, "w", indexed}, {"y", a, "v", indexed}}, true},
		{"one a domain", []link{{"x", a, "w", indexed}, {"d.example/y", a, "w", indexed}}, true},
		{"two of a URL", []link{{"x", a, "w", indexed}, {"y", b, "w", indexed}, {"z", a, "w", indexed}}, false},
		{"two of a URL, later links between", []link{{"x", b, "w", indexed}, {"y", a, "w", indexed}, {"z", a, "v", indexed}, {"q", b, "w", indexed}}, false},
	} {
		es := engines{}
		eng := es.open()
		st := newState(eng) // as a restore builds it: reads see its batch
		st.lastID = 10
		d := decoder{buf: section(c.links...)}
		err := readLinks(st, &d, snapshotV2)
		eng.release()
		if (err == nil && d.err == nil) != c.ok {
			t.Errorf("%s: %v, %v, want ok %v", c.name, err, d.err, c.ok)
		}
	}
}

// TestPlainlyCanonicalAgrees: the URLs the fast path takes are exactly
// what Canonicalize gives back unchanged, and common canonical URLs do
// take it.
func TestPlainlyCanonicalAgrees(t *testing.T) {
	cases := []struct {
		url   string
		plain bool
	}{
		{benchURL(7), true},
		{"https://example.com/", true},
		{"http://a.example/x/Y_z~1.html?a=1&a=0&b=&c", true},
		{"https://example.com/a:b@c=d+e,f", true},
		{"https://example.com", false},                 // no path: Canonicalize adds "/"
		{"https://Example.com/", false},                // uppercase host
		{"HTTPS://example.com/", false},                // uppercase scheme
		{"https://example.com:443/", false},            // default port
		{"https://example.com:8443/", false},           // any port takes the parse
		{"https://u@example.com/", false},              // userinfo
		{"https://example.com/a/", false},              // trailing slash
		{"https://example.com//a", false},              // empty segment
		{"https://example.com/%7Ea", false},            // an escape
		{"https://example.com/a b", false},             // a space
		{"https://example.com/?b=1&a=2", false},        // keys out of order
		{"https://example.com/?a=1&&b=2", false},       // an empty parameter
		{"https://example.com/?", false},               // an empty query
		{"https://example.com/#top", false},            // a fragment
		{"https://[::1]/", false},                      // IPv6
		{"ftp://example.com/", false},                  // another scheme
		{" https://example.com/", false},               // surrounding space
		{"https://example.com/a?q=x%20y", false},       // an escape in the query
		{"https://example.com/a?q=x;y", false},         // a semicolon
		{"https://xn--bcher-kva.example/a?b=1", true},  // an IDN's ASCII form
		{"https://example.com/a?b=1&b=0&c=2", true},    // repeated keys keep their order
		{"https://example.com/a?b/c=1?d", true},        // '/' and '?' in the query
		{"https://example.com/a?A=1&a=2", true},        // keys compare as bytes
		{"https://example.com/a?a=2&A=1", false},       // …so this is out of order
		{"https://example.com/a*(b)", false},           // sub-delimiters left to the parse
		{"https://example.com/~user/.hidden/..", true}, // dot segments are kept
	}
	for _, tc := range cases {
		if got := plainlyCanonical(tc.url); got != tc.plain {
			t.Errorf("plainlyCanonical(%q) = %v, want %v", tc.url, got, tc.plain)
		}
		if c, err := codes.Canonicalize(tc.url); tc.plain && (err != nil || c != tc.url) {
			t.Errorf("%q is taken as canonical, but Canonicalize gives %q, %v", tc.url, c, err)
		}
	}
}

// FuzzPlainlyCanonical: whatever the fast path takes as canonical,
// Canonicalize gives back unchanged.
func FuzzPlainlyCanonical(f *testing.F) {
	for _, s := range []string{benchURL(1), "https://example.com/", "http://a.b/c?d=e&f", "https://x.y/a?b=1&a=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, url string) {
		if !plainlyCanonical(url) {
			return
		}
		if c, err := codes.Canonicalize(url); err != nil || c != url {
			t.Fatalf("%q is taken as canonical, but Canonicalize gives %q, %v", url, c, err)
		}
	})
}

// BenchmarkCreatesOfOneTarget applies creates of links that all share
// one URL, a dedupe create of it, and deletes of them, against the same
// with a URL each: a target's list keeps each step constant time however
// many links it holds.
func BenchmarkCreatesOfOneTarget(b *testing.B) {
	const links = 100_000
	for _, shared := range []bool{true, false} {
		name := map[bool]string{true: "one-target", false: "a-target-each"}[shared]
		b.Run(name, func(b *testing.B) {
			target := func(i int) string {
				if shared {
					return "https://example.com/same"
				}
				return benchURL(i)
			}
			for range b.N {
				applyOneTarget(b, links, target)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*links), "ns/link")
		})
	}
}

func applyOneTarget(b *testing.B, links int, target func(int) string) {
	f := New()
	index := uint64(1)
	apply := func(cmd []byte) any {
		res := f.ApplyBatch([]*raft.Log{{Index: index, Type: raft.LogCommand, Data: cmd}})
		index++
		return res[0]
	}
	apply(InitCommand{Key: testKey}.Encode())
	apply(RaiseCommand{To: LevelTargets}.Encode())
	for start := 0; start < links; start += 1000 {
		items := make([]CreateRequest, 1000)
		for i := range items {
			items[i] = CreateRequest{URL: target(start + i), CustomCode: fmt.Sprintf("c%07d", start+i)}
		}
		apply(create(1, items...))
	}
	if res := apply(create(2, CreateRequest{URL: target(0), Dedupe: true})).([]CreateResult)[0]; res.Link.Code != "c0000000" {
		b.Fatalf("dedupe returned %q", res.Link.Code)
	}
	// Newest first: a workspace's list of positions shifts on every
	// other removal, which would measure that instead.
	for i := links - 1; i >= 0; i-- {
		apply(DeleteCommand{Code: fmt.Sprintf("c%07d", i), Now: 3}.Encode())
	}
}
