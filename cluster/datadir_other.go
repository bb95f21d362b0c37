//go:build !unix

package cluster

// ownedHere: here directories have no owner to check.
func ownedHere(string) error { return nil }
