package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/secure"
)

// clusterKeyFileName is the file in the data dir that keeps the key a node
// made for itself.
const clusterKeyFileName = "cluster.key"

// nodeKey is the cluster key a node runs with, and where it came from.
type nodeKey struct {
	key  *secure.Key
	file string // the file that keeps it; empty: --cluster-key or LINKRAFT_CLUSTER_KEY
	made bool   // made at this start
}

// resolveClusterKey finds the node's cluster key: --cluster-key (or
// LINKRAFT_CLUSTER_KEY); else --cluster-key-file (or
// LINKRAFT_CLUSTER_KEY_FILE), made there when missing; else
// <data-dir>/cluster.key, made at the first start. Every node runs with a
// key, so a process on the same host is a peer only if it holds it.
//
// Only a node on loopback makes a key. A node others can reach is meant
// to be one of several, which must all hold the same key: the operator
// gives it to each, rather than each making its own and none of them
// getting in.
func resolveClusterKey(cfg *serveConfig) (nodeKey, error) {
	if cfg.key != nil {
		return nodeKey{key: cfg.key}, nil
	}
	path := cfg.clusterKeyFile
	if path != "" {
		key, err := secure.ReadKeyFile(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return nodeKey{key: key, file: path}, err
		}
	} else {
		path = filepath.Join(cfg.dataDir, clusterKeyFileName)
	}
	if err := requireKeyOffLoopback(cfg); err != nil {
		return nodeKey{}, err
	}
	key, made, err := secure.KeyFile(path)
	if err != nil {
		return nodeKey{}, err
	}
	return nodeKey{key: key, file: path, made: made}, nil
}

// requireKeyOffLoopback refuses to make a key for a node whose Raft or
// gossip listener (bound or advertised) is not on loopback.
func requireKeyOffLoopback(cfg *serveConfig) error {
	addrs := []struct{ flag, addr string }{{"--raft-addr", cfg.raftAddr}, {"--gossip-addr", cfg.gossipAddr}, {"--advertise", cfg.advertise}}
	for _, a := range addrs {
		if a.addr == "" || cluster.OnLoopback(a.addr) {
			continue
		}
		missing := ""
		if cfg.clusterKeyFile != "" {
			missing = fmt.Sprintf(" (--cluster-key-file %s does not exist)", cfg.clusterKeyFile)
		}
		return fmt.Errorf("%s %s is not a loopback address and no cluster key was given%s: the other nodes need "+
			"the same key to let this one in. Make a key with `linkraft keygen` and give every node the same one, "+
			"in a file (--cluster-key-file) or in LINKRAFT_CLUSTER_KEY (only a node whose Raft and gossip addresses "+
			"are loopback makes its own)", a.flag, a.addr, missing)
	}
	return nil
}

// log says where the key is: the file, never the key. A key on the
// command line gets a warning: any local user can read it there.
func (k nodeKey) log(log *slog.Logger, onCommandLine bool) {
	switch {
	case k.file == "" && onCommandLine:
		log.Warn("the cluster key is on the command line, where any user of this machine can read it " +
			"(ps, /proc/<pid>/cmdline): give it in --cluster-key-file or LINKRAFT_CLUSTER_KEY instead")
	case k.file == "":
		log.Info("cluster key from LINKRAFT_CLUSTER_KEY")
	case k.made:
		log.Info("made a new cluster key: only a process that holds it takes part in this node's cluster; "+
			"to add nodes, give each this file (--cluster-key-file)", "file", k.file)
	default:
		log.Info("cluster key", "file", k.file)
	}
}
