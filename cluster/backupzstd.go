package cluster

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Backups kept away from the cluster (package backups) are compressed:
// they are stored and sent every interval, and a state of links compresses
// several times over. The envelope is backup.go's with format 2, and the
// snapshot inside it compressed with zstd (klauspost/compress, which
// fasthttp already brings):
//
//	"LKRB" | 2 | key (1 byte) | zstd(the snapshot) | HMAC-SHA256 over every byte before it
//
// The MAC covers the bytes stored, so a restore authenticates a backup
// before it decompresses anything, and the object's own SHA-256 (which
// package backups names it by) is a checksum of exactly what was stored.
const backupFormatCompressed = 2

// maxExpansion bounds how much larger than its compressed bytes a backup
// the cluster cannot authenticate may decompress to, so a forged one
// cannot exhaust memory. A state of links compresses far less; an
// authenticated backup, which this cluster made, is not bounded.
const maxExpansion = 64

// BackupCompressed writes a consistent copy of the whole state to w as
// Backup does, compressed (format 2). The encoder runs on this goroutine
// alone, so equal states give equal bytes: package backups tells an
// unchanged state by the hash of what it stored.
func (n *Node) BackupCompressed(w io.Writer) error {
	mac := n.cfg.Key.BackupMAC()
	signed := io.MultiWriter(w, mac)
	if _, err := signed.Write(append(bytes.Clone(backupMagic), backupFormatCompressed, backupKeyCluster)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	zw, err := zstd.NewWriter(signed, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return fmt.Errorf("backup: compressor: %w", err)
	}
	if err := n.fsm.WriteBackup(zw); err != nil {
		zw.Close()
		return fmt.Errorf("backup: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("backup: compress: %w", err)
	}
	if _, err := w.Write(mac.Sum(nil)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}
