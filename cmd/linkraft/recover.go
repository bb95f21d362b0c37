package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/cluster"
)

const recoverHelp = `Rebuild a cluster that lost quorum (offline), as docs/DEPLOY.md describes.

  1. Stop every surviving node.
  2. On each survivor write the same peers.json, listing every survivor's id
     and Raft address (hashicorp/raft format):
       [{"id": "n1", "address": "10.0.0.1:8081", "non_voter": false}, ...]
  3. On each survivor run: linkraft recover --data-dir DIR --peers peers.json
  4. Start the survivors again with their usual flags; they elect a leader.
  5. Grow back to three voters: start new nodes with an empty data dir and
     the usual --join (the leader adds them), or add each running one with
     linkraft join --id ID --raft-addr HOST:PORT.
`

// recoverCmd is "linkraft recover".
func recoverCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("recover", "recover --data-dir DIR --peers FILE\n\n"+recoverHelp, stderr)
	dataDir := fs.String("data-dir", "./data", "data dir of the stopped node (env LINKRAFT_DATA_DIR)")
	peers := fs.String("peers", "", "peers.json listing the surviving servers (env LINKRAFT_PEERS)")
	pos, code := parseArgs(fs, args, stderr, "data-dir", "peers")
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected arguments: %s", strings.Join(pos, " "))
	case *peers == "":
		return usageError(fs, stderr, "--peers is required")
	case *dataDir == "":
		return usageError(fs, stderr, "--data-dir is required")
	}
	rec, err := cluster.Recover(*dataDir, *peers)
	if err != nil {
		fmt.Fprintf(stderr, "linkraft recover: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "recovered %s: state up to log index %d (term %d), %d links\n", *dataDir, rec.Index, rec.Term, rec.Links)
	fmt.Fprintln(stdout, "the Raft configuration is now:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, s := range rec.Servers {
		suffrage := "voter"
		if s.Suffrage != raft.Voter {
			suffrage = "non-voter"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.ID, s.Address, suffrage)
	}
	tw.Flush()
	fmt.Fprintln(stdout, "\nnext: run linkraft recover with this same peers file on every server listed,")
	fmt.Fprintln(stdout, "then start each with its usual flags: its --id and Raft address must match its entry above.")
	return 0
}
