//go:build !race

package httpd

// raceEnabled: see race_test.go.
const raceEnabled = false
