package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"

	"github.com/linkraft/linkraft/cluster/secure"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// A backup leaves the cluster: it is kept in a backup store, copied, sent
// around, and whoever can write it there chooses every byte a restore
// installs. Its CRC-32C only catches damage. So a backup file is the
// snapshot in an authenticated envelope:
//
//	"LKRB" | format (1) | key (1 byte) | the snapshot (fsm's format) | HMAC-SHA256 (32 bytes)
//
// Format 2 holds the snapshot compressed (zstd), the HMAC over the bytes
// stored (backupzstd.go); format 1 backups restore as before.
//
// The HMAC covers every byte before it. The key byte says what keys it:
// 1, the cluster key's backup subkey (secure.Key.BackupMAC), so only a
// holder of the cluster key makes a backup this cluster restores; other
// values are left for later ways of signing.
//
// A restore checks the envelope before it decodes anything of the
// snapshot; the operator may restore a backup it cannot authenticate (of
// another cluster, or of a build that wrote the bare snapshot) on purpose
// (RestoreOptions.Foreign). Either way every record
// is then held to the rules a client's write meets (fsm.CheckRecords).
var backupMagic = []byte("LKRB")

const (
	backupFormat     = 1
	backupKeyCluster = 1 // HMAC under the cluster key's backup subkey
	backupHeaderSize = 6 // magic, format, key
	backupMACSize    = sha256.Size
	// macBlock is how much of a backup one MAC call takes: one call over
	// a large body cannot be preempted (DESIGN.md).
	macBlock = 64 << 10
)

// ErrBackupUnauthenticated is a backup this cluster cannot tell its own:
// made under another cluster key, changed since it was made, or from a
// build that did not authenticate backups. Its message says
// which, and that RestoreOptions.Foreign restores it anyway.
var ErrBackupUnauthenticated = errors.New("backup authentication failed")

// foreignHint is how the operator restores a backup on purpose.
const foreignHint = "restore it with --foreign (POST /admin/restore?foreign=true) only if you trust where it came from"

// ErrRestoreNotReady is a restore Raft refused for now: a membership change
// is still being committed. Trying again shortly succeeds.
var ErrRestoreNotReady = errors.New("the cluster cannot take a restore while a membership change is being committed; try again")

// RestoreOptions are what the operator says about a restore.
type RestoreOptions struct {
	// Foreign restores a backup this cluster cannot authenticate: one of
	// another cluster (another cluster key), or from a build before
	// backups were authenticated. Its records are
	// checked all the same.
	Foreign bool
	// By is the key id of the credential performing the restore
	// (fsm.RootKeyID for the operator's token): it still works after the
	// restore, and the audit log names it.
	By string
}

// Backup writes a consistent copy of the whole state to w, in the
// authenticated envelope above. The MAC is computed as the snapshot streams
// through, so the backup is never held whole.
func (n *Node) Backup(w io.Writer) error {
	mac := n.cfg.Key.BackupMAC()
	signed := io.MultiWriter(w, mac)
	if _, err := signed.Write(append(bytes.Clone(backupMagic), backupFormat, backupKeyCluster)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := n.fsm.WriteBackup(signed); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := w.Write(mac.Sum(nil)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// openBackup checks a backup's envelope and returns the snapshot inside it,
// as a stream the caller closes, and what vouched for it (the restore's
// audit entry says so). It decodes nothing of the snapshot, and holds
// little of the backup: it reads it through once for the MAC, and the
// snapshot is a second read of it, so backup must not change meanwhile (a
// copy of the caller's own: the POST's body, backups.Fetched). A backup
// that fails authentication is refused unless foreign, with an error that
// says why: one whose snapshot checksum fails too was damaged
// (fsm.ErrCorruptSnapshot); one whose checksum holds was made elsewhere or
// changed on purpose (ErrBackupUnauthenticated).
func openBackup(backup *io.SectionReader, key *secure.Key, foreign bool) (snapshot io.ReadCloser, vouched string, err error) {
	head := make([]byte, backupHeaderSize)
	n, err := backup.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return nil, "", fmt.Errorf("read backup: %w", err)
	}
	if fsm.HasSnapshotMagic(head[:n]) {
		if !foreign {
			return nil, "", fmt.Errorf("%w: the backup is a bare snapshot, as builds wrote before backups were authenticated, "+
				"so nothing shows who made it; %s", ErrBackupUnauthenticated, foreignHint)
		}
		return io.NopCloser(io.NewSectionReader(backup, 0, backup.Size())),
			"foreign backup (a bare snapshot of an earlier build), restored with --foreign", nil
	}
	format, authentic, err := readEnvelope(io.NewSectionReader(backup, 0, backup.Size()), key)
	if err != nil {
		return nil, "", err
	}
	// The MAC covers the stored bytes, compressed or not, so an authentic
	// backup is known good before anything of it is decompressed.
	body := io.NewSectionReader(backup, backupHeaderSize, backup.Size()-backupHeaderSize-backupMACSize)
	switch {
	case authentic:
		snapshot, err = snapshotOf(body, format, true)
		return snapshot, "backup authenticated by the cluster key", err
	case foreign:
		snapshot, err = snapshotOf(body, format, false)
		return snapshot, "foreign backup, not authenticated, restored with --foreign", err
	}
	// Damage is told from a forgery by the snapshot's own checksum (a
	// compressed one's damage as it is decompressed: zstd's frame
	// checksum, snapshotOf).
	snapshot, err = snapshotOf(body, format, false)
	if err != nil {
		return nil, "", err
	}
	defer snapshot.Close()
	intact, err := checksumMatches(snapshot)
	if err != nil {
		return nil, "", err
	}
	if !intact {
		return nil, "", fmt.Errorf("%w: checksum mismatch: the backup was damaged in storage or transfer", fsm.ErrCorruptSnapshot)
	}
	return nil, "", fmt.Errorf("%w: the backup was not made by a cluster holding this cluster key, or it was changed after it was made "+
		"(its checksum still matches, so not by damage); %s", ErrBackupUnauthenticated, foreignHint)
}

// readEnvelope reads a backup through once, a block at a time (macBlock),
// and returns its format and whether its MAC, its last 32 bytes, is the
// cluster key's over every byte before it. A header this build does not
// read, or too few bytes, is fsm.ErrCorruptSnapshot.
func readEnvelope(r io.Reader, key *secure.Key) (format byte, authentic bool, err error) {
	head := make([]byte, backupHeaderSize)
	_, err = io.ReadFull(r, head)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || err == nil && !bytes.HasPrefix(head, backupMagic):
		return 0, false, fmt.Errorf("%w: not a linkraft backup", fsm.ErrCorruptSnapshot)
	case err != nil:
		return 0, false, fmt.Errorf("read backup: %w", err)
	}
	format = head[4]
	if format != backupFormat && format != backupFormatCompressed {
		return 0, false, fmt.Errorf("%w: backup format %d, which this build does not read (a newer build made it?)", fsm.ErrCorruptSnapshot, format)
	}
	if made := head[5]; made != backupKeyCluster {
		return 0, false, fmt.Errorf("%w: key byte %d, which this build does not read", fsm.ErrCorruptSnapshot, made)
	}
	mac := key.BackupMAC()
	mac.Write(head)
	signed := newHoldBack(mac, backupMACSize)
	// r behind a bare Reader cannot choose its own block size (WriteTo).
	if _, err := io.CopyBuffer(signed, struct{ io.Reader }{r}, make([]byte, macBlock)); err != nil {
		return 0, false, fmt.Errorf("read backup: %w", err)
	}
	if len(signed.tail) < backupMACSize {
		return 0, false, fmt.Errorf("%w: not a linkraft backup", fsm.ErrCorruptSnapshot)
	}
	return format, hmac.Equal(mac.Sum(nil), signed.tail), nil
}

// snapshotOf is the snapshot a backup's body of format holds, as a
// stream: the body itself, or it decompressed (format 2). The
// decompressor's errors say the backup was damaged; one the cluster
// cannot authenticate may not decompress to more than maxExpansion times
// its size, nor ask for a window larger than the encoder ever uses, so a
// forged one cannot exhaust memory. (That window is not bounded by the
// expansion: a state of 200 KiB compresses to 25 KiB in frames that
// declare it whole.)
func snapshotOf(body *io.SectionReader, format byte, authentic bool) (io.ReadCloser, error) {
	if format != backupFormatCompressed {
		return io.NopCloser(body), nil
	}
	opts := []zstd.DOption{zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true)}
	limit := int64(-1)
	if !authentic {
		limit = body.Size()*maxExpansion + 1<<20 + 1 // a byte past the bound is the error
		opts = append(opts, zstd.WithDecoderMaxWindow(maxWindow))
	}
	dec, err := zstd.NewReader(body, opts...)
	if err != nil {
		return nil, fmt.Errorf("backup: decompressor: %w", err)
	}
	return &decompressed{dec: dec, left: limit}, nil
}

// maxWindow is the largest window BackupCompressed's encoder uses (zstd's
// SpeedDefault), which a backup this cluster cannot vouch for may ask for.
const maxWindow = 8 << 20

// decompressed is a compressed snapshot read through its decompressor,
// fewer than left bytes of it when left is not negative.
type decompressed struct {
	dec  *zstd.Decoder
	left int64
}

func (d *decompressed) Read(p []byte) (int, error) {
	if d.left == 0 {
		return 0, d.damaged(fmt.Errorf("it decompresses to more than %d times its size", maxExpansion))
	}
	if d.left > 0 && int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.dec.Read(p)
	if d.left > 0 {
		d.left -= int64(n)
	}
	if err != nil && err != io.EOF {
		err = d.damaged(err)
	}
	return n, err
}

func (d *decompressed) damaged(err error) error {
	return fmt.Errorf("%w: checksum mismatch: the compressed backup does not decompress, so it was damaged in storage or transfer (%v)",
		fsm.ErrCorruptSnapshot, err)
}

func (d *decompressed) Close() error {
	d.dec.Close()
	return nil
}

// checksumMatches reads a snapshot through, a block at a time, and
// reports whether its trailing checksum (fsm.NewSnapshotChecksum) matches
// the bytes before it. A read error (a compressed one's damage) is
// returned.
func checksumMatches(snapshot io.Reader) (bool, error) {
	crc := fsm.NewSnapshotChecksum()
	summed := newHoldBack(crc, crc32.Size)
	if _, err := io.CopyBuffer(summed, struct{ io.Reader }{snapshot}, make([]byte, macBlock)); err != nil {
		return false, err
	}
	return len(summed.tail) == crc32.Size && summed.size > crc32.Size && crc.Sum32() == binary.BigEndian.Uint32(summed.tail), nil
}

// holdBack passes everything written to it to h but the last n bytes
// (tail), a block at a time: a stream's trailing MAC or checksum is held
// back from the sum over what precedes it, without knowing where the
// stream ends.
type holdBack struct {
	h    hash.Hash
	n    int
	tail []byte
	size int64
}

func newHoldBack(h hash.Hash, n int) *holdBack {
	return &holdBack{h: h, n: n, tail: make([]byte, 0, 2*n)}
}

func (w *holdBack) Write(p []byte) (int, error) {
	w.size += int64(len(p))
	if len(p) >= w.n {
		w.h.Write(w.tail)
		w.h.Write(p[:len(p)-w.n])
		w.tail = append(w.tail[:0], p[len(p)-w.n:]...)
		return len(p), nil
	}
	w.tail = append(w.tail, p...)
	if over := len(w.tail) - w.n; over > 0 {
		w.h.Write(w.tail[:over])
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
	return len(p), nil
}

// restoreRules are fsm/input's rules for what a restored record holds,
// with this node's setting for private targets (fsm.InputRules).
type restoreRules struct{ allowPrivate bool }

// Target checks a URL as input.Target does, in the form a node stores.
func (r restoreRules) Target(url string) error {
	stored, err := input.Target(url, r.allowPrivate)
	if err != nil {
		return err
	}
	if stored != url {
		return errors.New("url: surrounding whitespace, which a node never stores")
	}
	return nil
}

// Workspace checks a workspace name as input.Workspace does.
func (restoreRules) Workspace(name string) error { return input.Workspace(name) }

// Restore makes the whole cluster take the state in a backup. The backup is
// verified completely before anything changes, and nothing changes when it
// fails: its envelope (openBackup: ErrBackupUnauthenticated unless
// opts.Foreign), then its snapshot (an error wrapping
// fsm.ErrCorruptSnapshot), then every record against the rules of a
// client's write and this node's setting for private targets (an error
// wrapping fsm.ErrRefusedRecord that names the record).
//
// A node that has only just started (a fresh node in a disaster recovery)
// is not ready yet: Raft refuses a restore until its first configuration is
// committed. Restore waits, within the write timeout, until this node is an
// established leader, which implies that. The restored state records the
// restore in its audit log, which only builds of fsm.LevelRestoreAudit read
// (and a backup may hold what only newer builds read): while a server runs
// an older build, Restore returns ErrUpgrading.
//
// The cluster keeps what it has handed out: codes, counters and link ids
// of the current state are merged into the backup before it is installed
// (fsm.KeepHandedOut), so no code is ever handed out twice; and the key
// performing the restore stays valid (fsm.RecordRestore).
func (n *Node) Restore(backup []byte, opts RestoreOptions) error {
	return n.RestoreFrom(io.NewSectionReader(bytes.NewReader(backup), 0, int64(len(backup))), opts)
}

// RestoreFrom is Restore of a backup it reads as a stream, twice (its MAC,
// then its snapshot), never holding it whole: a file of the caller's own,
// which must not change while it runs (backups.Fetched).
func (n *Node) RestoreFrom(backup *io.SectionReader, opts RestoreOptions) error {
	snap, vouched, err := readBackup(n.cfg, backup, opts.Foreign)
	if err != nil {
		return err
	}
	defer snap.Close()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Writes.Timeout)
	defer cancel()
	if err := n.leadership.waitReady(ctx, false); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := install(ctx, n, snap, fsm.RestoreRecord{KeyID: opts.By, Backup: vouched}); err != nil {
		return err
	}
	// The backup may come from another cluster and lack this leader's
	// address; recording it also gives every FSM a known applied index
	// again, which read-after-write waits on.
	if _, _, err := n.apply(fsm.ServerCommand{ID: n.cfg.ID, HTTPAddr: n.cfg.HTTPAddr}); err != nil {
		return fmt.Errorf("restore: record leader address: %w", err)
	}
	return nil
}

// readBackup checks a backup whole before anything changes: its envelope,
// its snapshot, and every record against a client's rules (Restore). It
// returns the snapshot and what vouched for it.
func readBackup(cfg Config, backup *io.SectionReader, foreign bool) (*fsm.Snapshot, string, error) {
	snapshot, vouched, err := openBackup(backup, cfg.Key, foreign)
	if err != nil {
		return nil, "", err
	}
	snap, err := fsm.ReadSnapshot(snapshot)
	snapshot.Close()
	if err != nil {
		return nil, "", err
	}
	if err := snap.CheckRecords(restoreRules{allowPrivate: cfg.Writes.AllowPrivateTargets}); err != nil {
		snap.Close()
		return nil, "", err
	}
	return snap, vouched, nil
}

// install has the cluster take snap, once every server's build reads it,
// and records the restore as record says.
func install(ctx context.Context, n *Node, snap *fsm.Snapshot, record fsm.RestoreRecord) error {
	if err := n.levels.require(ctx, max(fsm.LevelRestoreAudit, snap.Level())); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	keptKey, err := installMerged(n, snap, record)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	n.log.Info("backup restored", "key_id", record.KeyID, "backup", record.Backup, "links", snap.Links())
	if keptKey {
		n.log.Warn("the backup revoked the key that restored it; the key was kept", "key_id", record.KeyID)
	}
	return nil
}

// installMerged merges the current state into snap and has Raft install
// the result on every node. No entry is proposed through this node from the
// barrier to the install, and the barrier applies every entry proposed
// before it, so the merge sees every code handed out until the install:
// a create racing with the restore either lands before the merge (and its
// code is kept out of use) or waits and lands on the restored state. The
// restore is recorded at this node's clock, as a leader stamps entries; it
// reports whether the restoring key was kept against the backup.
func installMerged(n *Node, snap *fsm.Snapshot, record fsm.RestoreRecord) (keptKey bool, err error) {
	n.proposals.Lock()
	defer n.proposals.Unlock()
	if err := n.raft.Barrier(n.cfg.Writes.Timeout).Error(); err != nil {
		return false, fmt.Errorf("barrier: %w", raftError(err))
	}
	n.fsm.KeepHandedOut(snap)
	record.At = time.Now().UnixMilli()
	keptKey = n.fsm.RecordRestore(snap, record)
	// Raft wants the size up front; encoding twice (the second time
	// streamed to Raft) costs CPU but never holds a second copy of the
	// snapshot in memory. Equal states encode to equal bytes.
	size, err := snap.WriteTo(io.Discard)
	if err != nil {
		return false, err
	}
	pr, pw := io.Pipe()
	encoded := make(chan error, 1)
	go func() {
		_, err := snap.WriteTo(pw)
		pw.CloseWithError(err)
		encoded <- err
	}()
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Size: size}
	err = n.raft.Restore(meta, pr, n.cfg.Writes.Timeout)
	// Raft may stop reading early (not leader, enqueue timeout); closing
	// the reader ends the encoder then.
	pr.Close()
	if encErr := <-encoded; err == nil && encErr != nil {
		return false, encErr
	}
	if err != nil {
		if strings.Contains(err.Error(), "cannot restore snapshot now") {
			// hashicorp/raft has no error value for this refusal.
			return false, fmt.Errorf("%w (raft: %v)", ErrRestoreNotReady, err)
		}
		return false, raftError(err)
	}
	return keptKey, nil
}
