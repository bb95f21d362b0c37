// Package e2e holds the end-to-end tests of linkraft: they build the linkraft
// binary once, run it as real processes on loopback addresses and talk to it
// over HTTP the way a user or an operator would.
//
// Run them with
//
//	go test -race -count=1 ./e2e/
//
// They are skipped with -short, so `go test -short ./...` runs only unit tests.
package e2e
