//go:build !unix

package backups

// noFollow is nothing where the platform has no such flags: O_EXCL alone
// keeps a new file from being created through a link (Windows' CREATE_NEW
// fails on any existing name).
const noFollow = 0
