// Command linkraft is a URL shortener that is its own replicated database.
// This package only parses flags and wires the fsm, cluster and httpd
// packages together; see the README for how to run it.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/linkraft/linkraft/cluster/secure"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `linkraft: a URL shortener that is its own fault-tolerant database

Usage:
  linkraft serve [flags]   run a node (no flags: a single node on 127.0.0.1:8080, data in ./data)
  linkraft health [--addr URL]
                           exit 0 when the node answers /health healthy, else 1
                           (the container image's HEALTHCHECK)
  linkraft status          show the cluster: leader, term, indexes, servers
  linkraft join --id ID --raft-addr HOST:PORT [--http-addr HOST:PORT]
                           add a server to the cluster as a voter
                           (--non-voter: as a read replica)
  linkraft leave --id ID   remove a server from the cluster
  linkraft promote --id ID make a non-voter (read replica) a voter
  linkraft transfer        the leader hands leadership to another voter
  linkraft backup [-o FILE]
                           save a consistent snapshot of all state, signed
                           with the cluster key
  linkraft restore FILE|-  make the whole cluster take the state in a backup
                           of its own (--foreign: of another cluster)
  linkraft keys create|list|revoke
                           manage API keys
  linkraft links create|list|get|edit|history|delete
                           manage links
  linkraft import --from yourls|shlink|kutt|bitly|csv [--dry-run] FILE
                           bring links over from another shortener's export
  linkraft recover --data-dir DIR --peers FILE
                           offline: rebuild a cluster that lost quorum
  linkraft bench [flags]   load one or more nodes and report throughput and latency
  linkraft keygen          print a new random cluster key
  linkraft version         print the version

The admin commands (status, join, leave, promote, transfer, backup, restore,
keys, import) talk to any node: --addr (LINKRAFT_ADDR, default
http://127.0.0.1:8080) and an admin credential: --key (LINKRAFT_KEY; a new
cluster writes its first admin key to <data-dir>/admin.key) or --admin-token
(LINKRAFT_ADMIN_TOKEN). links takes the same --addr and any key with the
links:read or links:write scope. For a node serving HTTPS, --addr https://…;
--ca-file (LINKRAFT_CA_FILE) adds a PEM bundle of CAs to the system's and
--server-name (LINKRAFT_SERVER_NAME) is the name its certificate must hold
when --addr is an IP address. A plain http:// address that a node answers
with a 308 to https on the same host is followed once, and said so. Run
"linkraft <command> -h" for a command's flags.
Every serve flag can also be set through an environment variable: --http-addr
is LINKRAFT_HTTP_ADDR.
`

const keygenUsage = `Usage: linkraft keygen

Print a new random cluster key: 32 bytes in base64. Give every node of a
cluster the same one, in a file readable by the node's user only
(linkraft keygen > cluster.key; --cluster-key-file cluster.key) or in
LINKRAFT_CLUSTER_KEY: a command line (--cluster-key) is readable by every
user of the machine. A node given none makes its own at its first start,
<data-dir>/cluster.key, when its Raft and gossip addresses are loopback.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command args[0] and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return dispatch("linkraft", usage, map[string]subcommand{
		"serve":     func(args []string, _, stderr io.Writer) int { return serve(args, stderr) },
		"health":    healthCmd,
		"status":    adminStatus,
		"join":      adminJoin,
		"leave":     adminLeave,
		"promote":   adminPromote,
		"transfer":  adminTransfer,
		"backup":    adminBackup,
		"restore":   func(args []string, stdout, stderr io.Writer) int { return adminRestore(args, os.Stdin, stdout, stderr) },
		"keys":      keysCmd,
		"links":     linksCmd,
		"import":    importCmd,
		"recover":   recoverCmd,
		"bench":     benchCmd,
		"version":   versionCmd,
		"--version": versionCmd,
		"-v":        versionCmd,
		"keygen":    keygenCmd,
	}, args, stdout, stderr)
}

// versionCmd is "linkraft version".
func versionCmd(_ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, "linkraft", version)
	return 0
}

// keygenCmd is "linkraft keygen": a new cluster key on stdout.
func keygenCmd(args []string, stdout, stderr io.Writer) int {
	// Arguments are a request for help or a mistake: either way no key,
	// which would be one printed to the terminal for nothing.
	if len(args) > 0 {
		if a := args[0]; a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprint(stderr, keygenUsage)
			return 0
		}
		fmt.Fprintf(stderr, "linkraft keygen: unexpected arguments: %s\n%s", strings.Join(args, " "), keygenUsage)
		return 2
	}
	fmt.Fprintln(stdout, secure.GenerateKey())
	return 0
}
