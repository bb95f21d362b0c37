//go:build !linux

package cluster

// dropFileMappings does nothing here: only Linux's pages are released
// (storepages_linux.go). The kernel still reclaims them under pressure.
func dropFileMappings(string) error { return nil }
