//go:build unix

package backups

import "syscall"

// noFollow opens a file only when its last element is not a link, and
// never waits on one that is not a regular file (a FIFO put in place of a
// backup would block its open until a writer came).
const noFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
