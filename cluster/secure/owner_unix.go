//go:build unix

package secure

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ownFile refuses a key file that is not this process's user's alone.
func ownFile(path string, info fs.FileInfo) error {
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("cluster key file %s belongs to uid %d, not to this process's user (uid %d): "+
			"whoever owns it can change the cluster key; make it this user's (chown <user> %s; chmod 600 %s)",
			path, st.Uid, os.Geteuid(), path, path)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return fmt.Errorf("cluster key file %s is open to group or others (mode %04o): "+
			"whoever could read it holds the cluster key; make it the owner's alone (chmod 600 %s), "+
			"and if others may have read it, give every node a new key (linkraft keygen)",
			path, mode, path)
	}
	return nil
}
