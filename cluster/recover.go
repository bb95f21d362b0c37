package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/linkraft/linkraft/fsm"
)

// Recovery describes what Recover did to a data dir.
type Recovery struct {
	// Servers is the configuration the data dir now holds.
	Servers []raft.Server
	// Index and Term are those of the snapshot Recover wrote: the last
	// entry this node had, committed or not.
	Index, Term uint64
	// Links is the number of links in the recovered state.
	Links int
}

// Recover rewrites the Raft configuration stored in dataDir to the servers
// listed in peersFile, for a cluster that lost quorum and cannot elect a
// leader any more (Consul's and rqlite's peers.json recovery, done offline).
//
// peersFile is a peers.json in hashicorp/raft's format:
//
//	[
//	  {"id": "n1", "address": "10.0.0.1:8081", "non_voter": false},
//	  {"id": "n2", "address": "10.0.0.2:8081", "non_voter": false}
//	]
//
// where "address" is each server's Raft address (--raft-addr, or the
// --advertise address others dial).
//
// The procedure:
//
//  1. Stop every surviving node (linkraft serve). Nodes that are gone stay gone.
//  2. On each survivor, write the same peers.json, listing every survivor's
//     --id and Raft address.
//  3. Run `linkraft recover --data-dir DIR --peers peers.json` on each
//     survivor (optionally take a copy of DIR first).
//  4. Start the survivors again with their usual flags. They elect a leader
//     among themselves; lost nodes can later be replaced with a fresh data dir
//     and --join or POST /admin/join.
//
// Recover replays the node's log into a fresh state machine, writes a
// snapshot holding that state and the new configuration, and removes the
// log, so each survivor keeps every entry it had (including entries that were
// never committed: the survivor with the longest log should be started first
// if that matters). It refuses a data dir without Raft state, a malformed or
// empty peers file, and a data dir a running node holds open. It reports
// what the data dir holds now.
func Recover(dataDir, peersFile string) (Recovery, error) {
	conf, err := readPeers(peersFile)
	if err != nil {
		return Recovery{}, err
	}
	dbPath := filepath.Join(dataDir, "raft.db")
	if _, err := os.Stat(dbPath); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Recovery{}, fmt.Errorf("no Raft state in %s (no raft.db): nothing to recover; is --data-dir right?", dataDir)
		}
		return Recovery{}, fmt.Errorf("data dir: %w", err)
	}

	if err := checkStore(dbPath); err != nil {
		return Recovery{}, fmt.Errorf("%w: recover another survivor's data dir instead", err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        dbPath,
		BoltOptions: &bbolt.Options{Timeout: time.Second, NoFreelistSync: true},
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return Recovery{}, fmt.Errorf("%s is locked: is linkraft still running on this data dir? Stop it first", dbPath)
		}
		return Recovery{}, fmt.Errorf("open raft store: %w", err)
	}
	defer store.Close()
	if err := verifyLog(store); err != nil {
		return Recovery{}, fmt.Errorf("%w: recover another survivor's data dir instead", err)
	}

	// Recover runs offline, outside a node: its few Raft lines go to the
	// process's default logger.
	hlog := NewHCLogger(slog.Default(), "raft", hclog.Warn)
	snaps, err := openSnapshots(dataDir, hlog)
	if err != nil {
		return Recovery{}, err
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return Recovery{}, fmt.Errorf("inspect raft state: %w", err)
	}
	if !has {
		return Recovery{}, fmt.Errorf("no Raft state in %s (empty log, no snapshot): nothing to recover", dataDir)
	}

	rc := raft.DefaultConfig()
	// LocalID only has to be valid: RecoverCluster neither runs nor
	// advertises this server.
	rc.LocalID = conf.Servers[0].ID
	rc.Logger = hlog
	f := fsm.New()
	defer f.Close()
	_, trans := raft.NewInmemTransport("")
	defer trans.Close()
	if err := raft.RecoverCluster(rc, f, store, store, snaps, trans, conf); err != nil {
		return Recovery{}, fmt.Errorf("recover cluster: %w", err)
	}

	rec := Recovery{Servers: conf.Servers, Links: f.Len()}
	if list, err := snaps.List(); err == nil && len(list) > 0 {
		rec.Index, rec.Term = list[0].Index, list[0].Term
	}
	return rec, nil
}

// readPeers reads and checks a peers.json.
func readPeers(path string) (raft.Configuration, error) {
	if path == "" {
		return raft.Configuration{}, errors.New("no peers file given")
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return raft.Configuration{}, fmt.Errorf("peers file %s: %w (want a JSON list of {\"id\", \"address\", \"non_voter\"})", path, err)
	}
	if len(conf.Servers) == 0 {
		return raft.Configuration{}, fmt.Errorf("peers file %s lists no servers", path)
	}
	for _, s := range conf.Servers {
		host, port, err := net.SplitHostPort(string(s.Address))
		if err != nil || host == "" || port == "" {
			return raft.Configuration{}, fmt.Errorf("peers file %s: server %q: address %q is not host:port", path, s.ID, s.Address)
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			return raft.Configuration{}, fmt.Errorf("peers file %s: server %q: address %q is not reachable by other nodes", path, s.ID, s.Address)
		}
	}
	return conf, nil
}
