package fsm

import (
	"errors"
	"reflect"
	"testing"
)

// TestSealedCommandsRefuseAnyChangedBit: a disk that flips one bit of a
// stored entry must never make it decode to another command (a link with
// another target, say); CRC-32C catches every single-bit change.
func TestSealedCommandsRefuseAnyChangedBit(t *testing.T) {
	entries := map[string][]byte{
		"init":    InitCommand{Key: [32]byte{1, 2, 3}, ClusterID: [16]byte{4}}.Encode(),
		"create":  CreateBatch{Now: 1700000000000, Items: []CreateRequest{{URL: "https://example.com/a", Workspace: "default", CodeLength: 7, RequestID: "k1"}}}.Encode(),
		"delete":  DeleteCommand{Code: "abc1234", Now: 5}.Encode(),
		"clicks":  ClickBatch{Node: "n1", Seq: 9, Now: 7, Counts: []ClickCount{{Code: "abc1234", Count: 3}}}.Encode(),
		"purge":   PurgeCommand{ExpiredBefore: 1, RequestsBefore: 2}.Encode(),
		"server":  ServerCommand{ID: "n1", HTTPAddr: "10.0.0.1:8080"}.Encode(),
		"removal": ServerRemovalCommand{ID: "n4", Incarnation: "0123456789abcdef", Forget: true}.Encode(),
	}
	for name, entry := range entries {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeCommand(entry); err != nil {
				t.Fatalf("sealed entry does not decode: %v", err)
			}
			for i := range entry {
				for bit := range 8 {
					changed := append([]byte(nil), entry...)
					changed[i] ^= 1 << bit
					if cmd, err := DecodeCommand(changed); err == nil {
						t.Fatalf("byte %d bit %d changed, still decodes, to %+v", i, bit, cmd)
					}
				}
			}
		})
	}
}

// TestUnsealedCommandsStillDecode: entries written before commands carried
// a checksum replay as they did.
func TestUnsealedCommandsStillDecode(t *testing.T) {
	sealed := DeleteCommand{Code: "abc1234", Now: 5}.Encode()
	unsealed := append([]byte{sealed[0] &^ sealedFlag}, sealed[1:len(sealed)-sealedBytes]...)
	cmd, err := DecodeCommand(unsealed)
	if err != nil || !reflect.DeepEqual(cmd, DeleteCommand{Code: "abc1234", Now: 5}) {
		t.Fatalf("unsealed delete: %+v, %v", cmd, err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := DecodeCommand(sealed); !errors.Is(err, ErrCorruptCommand) {
		t.Fatalf("sealed entry with a bad checksum: %v, want ErrCorruptCommand", err)
	}
}
