package cluster

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/fsm"
)

// TestVerifyLogAcrossASnapshotGap: a node that installed a snapshot keeps
// entries below it and appends above it. The gap is no damage; a damaged
// entry on either side still is.
func TestVerifyLogAcrossASnapshotGap(t *testing.T) {
	t.Parallel()
	good := fsm.ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:8080"}.Encode()
	bad := append([]byte(nil), good...)
	bad[3] ^= 1 // the checksum no longer matches
	store := func(damaged uint64) raft.LogStore {
		s := raft.NewInmemStore()
		var logs []*raft.Log
		for _, i := range []uint64{5, 6, 7, 20, 21, 22} {
			data := good
			if i == damaged {
				data = bad
			}
			logs = append(logs, &raft.Log{Index: i, Type: raft.LogCommand, Data: data})
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		damaged uint64
		want    error
	}{
		{0, nil},
		{5, ErrDamagedStore},
		{7, ErrDamagedStore},
		{20, ErrDamagedStore},
		{22, ErrDamagedStore},
	} {
		if err := verifyLog(store(c.damaged)); !errors.Is(err, c.want) {
			t.Errorf("entry %d damaged: verifyLog = %v, want %v", c.damaged, err, c.want)
		}
	}
}
