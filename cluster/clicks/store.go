package clicks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/linkraft/linkraft/cluster/internal/ownfile"
	"github.com/linkraft/linkraft/fsm"
)

// Clicks a node holds when it stops without reaching a leader would be
// lost with the process. So the stop writes them to the data dir (Save),
// and the next start (New) sends them first: the batch whose outcome was unknown keeps
// its sequence number (the state machine applies a sequence once, so a
// batch that did reach the log before the stop is not counted twice), and
// the clicks never proposed join the next batch. Only a kill -9 loses
// clicks: those counted since the last flush, at most one flush interval.

// pendingClicksFile holds the clicks a stopped node did not flush: two
// records, each a uvarint length and then a click batch entry, or nothing
// when the length is 0; the first is the batch with an unknown outcome,
// the second the counts never proposed. A node upgraded in place reads the
// file the build before it wrote: the layout stays as it is, and the
// batches are log entries, which every later build decodes.
const pendingClicksFile = "clicks-pending"

// saveClicks writes the unflushed clicks (a batch proposed with an unknown
// outcome, and the counts never proposed) atomically to dir. Each is a
// click batch entry as the log carries it, so its checksum guards it on
// disk as in the log.
func saveClicks(dir string, pending *fsm.ClickBatch, counts map[codeVisitor]uint64) error {
	var data []byte
	for _, b := range []*fsm.ClickBatch{pending, countsBatch(counts)} {
		var entry []byte
		if b != nil {
			entry = (*b).Encode()
		}
		data = binary.AppendUvarint(data, uint64(len(entry)))
		data = append(data, entry...)
	}
	path := filepath.Join(dir, pendingClicksFile)
	if err := ownfile.Write(path, data); err != nil {
		return fmt.Errorf("save unflushed clicks: %w", err)
	}
	return nil
}

// countsBatch carries never-proposed counts to disk; its sequence is 0
// because it gets one when it is proposed.
func countsBatch(counts map[codeVisitor]uint64) *fsm.ClickBatch {
	if len(counts) == 0 {
		return nil
	}
	b := &fsm.ClickBatch{Visitors: true}
	for key, n := range counts {
		b.Counts = append(b.Counts, fsm.ClickCount{Code: key.code, Count: n, Visitor: key.visitor})
	}
	return b
}

// loadClicks reads what saveClicks wrote; nothing when there is no file.
func loadClicks(dir string) (pending *fsm.ClickBatch, counts map[codeVisitor]uint64, err error) {
	data, err := os.ReadFile(filepath.Join(dir, pendingClicksFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read unflushed clicks: %w", err)
	}
	var batches [2]*fsm.ClickBatch
	for i := range batches {
		n, w := binary.Uvarint(data)
		if w <= 0 || uint64(len(data)-w) < n {
			return nil, nil, fmt.Errorf("read unflushed clicks: %s is damaged", pendingClicksFile)
		}
		entry := data[w : w+int(n)]
		data = data[w+int(n):]
		if n == 0 {
			continue
		}
		cmd, err := fsm.DecodeCommand(entry)
		b, ok := cmd.(fsm.ClickBatch)
		if err != nil || !ok {
			return nil, nil, fmt.Errorf("read unflushed clicks: %s is damaged: %v", pendingClicksFile, err)
		}
		batches[i] = &b
	}
	if batches[1] != nil {
		counts = map[codeVisitor]uint64{}
		for _, c := range batches[1].Counts {
			counts[codeVisitor{c.Code, c.Visitor}] += c.Count
		}
	}
	return batches[0], counts, nil
}

// forgetSavedClicks removes the file once what it held is in the log.
func forgetSavedClicks(dir string) error {
	err := os.Remove(filepath.Join(dir, pendingClicksFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", pendingClicksFile, err)
	}
	return nil
}
