//go:build unix

package cluster

import (
	"fmt"
	"os"
	"syscall"
)

// ownedHere refuses a data dir that another user owns, root excepted:
// root may change anything anyway, and platforms mount volumes as root.
func ownedHere(dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 || int(st.Uid) == os.Geteuid() {
		return nil
	}
	return fmt.Errorf("data dir %s belongs to uid %d, not to this process's user (uid %d): "+
		"whoever owns it can change the node's state and keys; make it this user's (chown -R <user> %s)",
		dir, st.Uid, os.Geteuid(), dir)
}
