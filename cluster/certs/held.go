package certs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/linkraft/linkraft/cluster/internal/ownfile"
	"github.com/linkraft/linkraft/fsm"
)

// A restarted node's state machine holds only its last snapshot until the
// leader tells it what is committed: an election and a catch-up, seconds
// during which a certificate stored after that snapshot is missing from
// its state. So each node keeps, in its data dir, the certificates its
// state holds, with the index they were read at, and serves them at its
// next start until its state has applied that index; from then on its
// state holds all of it, or something newer, and alone is served. A kept
// certificate is served over the state's only while it ends later: the
// state's renewal wins as soon as it is applied.
//
// The file is sealed whole with the cluster key (its keys are the state's
// sealed keys besides), written whole and owner-only (ownfile). It is
// this node's alone, never replicated nor backed up.

// HeldFileName is the kept certificates' file in the data dir.
const HeldFileName = "certificates"

// heldAAD binds the sealed file to what it is.
const heldAAD = "kept certificates"

// heldVersion is the file's format.
const heldVersion = 1

// maxHeldBytes bounds the file read at start: every certificate the
// state may hold, at its largest, with room for the encoding.
const maxHeldBytes = fsm.MaxCertificates * 2 * (fsm.MaxCertChain + fsm.MaxSealedKey)

// keepEvery is how often Follow compares the state's certificates with
// those kept, at most: each comparison copies the state's list, and
// entries are applied by the thousand a second under load. A certificate
// kept up to this late costs nothing: until it is, the next start serves
// the one kept before, then the state's.
const keepEvery = time.Second

// Progress is what a Source follows of this node's state machine.
type Progress interface {
	// Changed is closed by the next change the state machine applies (an
	// entry, a restore). It is taken before the state is read, so no
	// change slips between the read and the wait.
	Changed() <-chan struct{}
	// Applied is the index of the last entry the state machine applied.
	Applied() uint64
}

type heldFile struct {
	Version      int          `json:"v"`
	Applied      uint64       `json:"applied"`
	Certificates []heldRecord `json:"certificates"`
}

type heldRecord struct {
	Name      string `json:"name"`
	Chain     string `json:"chain"`
	Key       []byte `json:"key"` // sealed, as the state holds it
	NotBefore int64  `json:"not_before"`
	NotAfter  int64  `json:"not_after"`
}

// Follow keeps the held file up to date with the state's certificates,
// stops serving the kept ones once the state has applied what they were
// taken from, and closes Ready when it is due, on each change p
// announces, until ctx ends (what changed since the last write is then
// written).
func (s *Source) Follow(ctx context.Context, p Progress) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var lastKeep time.Time
	// dirty: a change since the last keep; pending: timer is set for it.
	dirty, pending := true, false
	for {
		changed := p.Changed()
		s.caughtUp(p.Applied())
		s.updateReady()
		if dirty && !pending {
			timer.Reset(max(0, keepEvery-time.Since(lastKeep)))
			pending = true
		}
		select {
		case <-ctx.Done():
			if dirty {
				s.keep(p)
			}
			return
		case <-changed:
			dirty = true
		case <-timer.C:
			dirty, pending, lastKeep = false, false, time.Now()
			s.keep(p)
		}
	}
}

// caughtUp stops serving the kept certificates once the state has applied
// the index they were taken at.
func (s *Source) caughtUp(applied uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil || applied < s.heldAt {
		return
	}
	s.held = nil
	s.log.Info("the state holds what was kept at the last run: its certificates alone are served", "applied", applied, "kept_at", s.heldAt)
}

// keep writes the state's certificates to the held file when they differ
// from what it holds, and only once the state has applied what the file
// was taken from: a state behind it would replace newer certificates with
// older ones.
func (s *Source) keep(p Progress) {
	if s.heldFile == "" {
		return
	}
	list := s.state.Certificates()
	// Read after the list: the list is of this index or an earlier one, so
	// a state that has applied it holds the list or something newer.
	applied := p.Applied()
	s.mu.Lock()
	behind := s.held != nil
	s.mu.Unlock()
	if behind || slices.Equal(list, s.kept) {
		return
	}
	if err := writeHeld(s.heldFile, s.seal, applied, list); err != nil {
		s.log.Warn("could not keep the certificates served here for the next start; it serves them once its state has them", "file", s.heldFile, "err", err)
		return
	}
	s.kept = list
	s.log.Info("kept the certificates served here for the next start", "certificates", len(list), "applied", applied)
}

// loadHeld reads the held file, if there is one, and keeps each
// certificate a handshake can use.
func (s *Source) loadHeld() {
	if s.heldFile == "" {
		return
	}
	applied, list, err := readHeld(s.heldFile, s.seal)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.log.Warn("the certificates kept at the last run are unreadable: HTTPS waits for the state's", "file", s.heldFile, "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held, s.heldAt, s.kept = map[string]fsm.Certificate{}, applied, list
	now := time.Now().UnixMilli()
	for _, c := range list {
		if c.NotAfter <= now {
			// A browser refuses it as surely as a TLS alert, and the state
			// holds the same or its renewal: waiting for it is no worse.
			continue
		}
		if _, err := s.parse(c); err != nil {
			s.log.Warn("a certificate kept at the last run is unusable; the state's is served once it has it", "name", c.Name, "err", err)
			continue
		}
		s.held[c.Name] = c
	}
	s.log.Info("serving the certificates kept at the last run until the state holds what they were taken from",
		"certificates", len(s.held), "kept_at", applied)
}

func writeHeld(path string, seal Sealer, applied uint64, list []fsm.Certificate) error {
	f := heldFile{Version: heldVersion, Applied: applied, Certificates: make([]heldRecord, 0, len(list))}
	for _, c := range list {
		f.Certificates = append(f.Certificates, heldRecord{Name: c.Name, Chain: c.Chain, Key: []byte(c.Key), NotBefore: c.NotBefore, NotAfter: c.NotAfter})
	}
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode the kept certificates: %w", err)
	}
	if err := ownfile.Write(path, seal.Seal(data, []byte(heldAAD))); err != nil {
		return fmt.Errorf("write the kept certificates: %w", err)
	}
	return nil
}

func readHeld(path string, seal Sealer) (uint64, []fsm.Certificate, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer file.Close()
	sealed, err := io.ReadAll(io.LimitReader(file, maxHeldBytes+1))
	if err != nil {
		return 0, nil, err
	}
	if len(sealed) > maxHeldBytes {
		return 0, nil, fmt.Errorf("larger than %d bytes", maxHeldBytes)
	}
	data, err := seal.Open(sealed, []byte(heldAAD))
	if err != nil {
		return 0, nil, err
	}
	var f heldFile
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, nil, fmt.Errorf("decode: %w", err)
	}
	if f.Version != heldVersion {
		return 0, nil, fmt.Errorf("format %d, not %d", f.Version, heldVersion)
	}
	list := make([]fsm.Certificate, 0, len(f.Certificates))
	for _, r := range f.Certificates {
		list = append(list, fsm.Certificate{Name: r.Name, Chain: r.Chain, Key: string(r.Key), NotBefore: r.NotBefore, NotAfter: r.NotAfter})
	}
	return f.Applied, list, nil
}
