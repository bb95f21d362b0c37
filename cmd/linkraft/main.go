// Command linkraft is a URL shortener that is its own replicated database.
// This package only parses flags and wires the fsm, cluster and httpd
// packages together; see the README for how to run it.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `linkraft: a URL shortener that is its own fault-tolerant database

Usage:
  linkraft serve [flags]   run a node (no flags: a single node on :8080, data in ./data)
  linkraft keygen          print a new --cluster-key
  linkraft version         print the version

Run "linkraft serve -h" for the flags. Every flag can also be set through an
environment variable: --http-addr is LINKRAFT_HTTP_ADDR.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "linkraft", version)
		return 0
	case "keygen":
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			fmt.Fprintln(stderr, "keygen:", err)
			return 1
		}
		fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(key))
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "linkraft: unknown command %q\n\n%s", args[0], usage)
	return 2
}
