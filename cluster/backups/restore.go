package backups

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrChecksum is a backup whose bytes are not those stored: its SHA-256
// differs from the one its name records.
var ErrChecksum = errors.New("checksum mismatch")

// Candidate is one backup a restore may install.
type Candidate struct {
	Store Store
	Name  string
}

// String names the candidate as messages show it: a file's path, or the
// store and object name.
func (c Candidate) String() string {
	if d, ok := c.Store.(Dir); ok {
		return filepath.Join(d.Path, c.Name)
	}
	return c.Store.String() + c.Name
}

// Fetch reads the backup and, when its name records its hash, checks it:
// damage in storage or transfer is found before anything is sent to a
// node.
func (c Candidate) Fetch(ctx context.Context) ([]byte, error) {
	data, err := c.Store.Get(ctx, c.Name)
	if err != nil {
		return nil, err
	}
	if n, ok := ParseName(c.Name); ok {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:])[:16]; got != n.Hash {
			return nil, fmt.Errorf("%w: %s has SHA-256 %s…, its name says %s…: it was damaged in storage or transfer",
				ErrChecksum, c, got, n.Hash)
		}
	}
	return data, nil
}

// Candidates are the backups a source names, newest first: a file, an
// object, or every backup in a directory or under an s3:// prefix (of
// any cluster: a new cluster restores an old one's). A source that holds
// no backup is an error.
func Candidates(ctx context.Context, source string, opts S3Options) ([]Candidate, error) {
	if strings.HasPrefix(source, "s3://") {
		bucket, key, err := splitS3(source)
		if err != nil {
			return nil, err
		}
		if key != "" && !strings.HasSuffix(key, "/") {
			// An object, if the listing of its "folder" has it;
			// else a prefix.
			dir, base := path.Split(key)
			store, err := NewS3(ctx, bucket, dir, opts)
			if err != nil {
				return nil, err
			}
			names, err := store.List(ctx)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", store, err)
			}
			if slices.Contains(names, base) {
				return []Candidate{{store, base}}, nil
			}
		}
		store, err := NewS3(ctx, bucket, key, opts)
		if err != nil {
			return nil, err
		}
		return newestIn(ctx, store)
	}
	fi, err := os.Stat(source)
	if err != nil {
		return nil, fmt.Errorf("backup source: %w", err)
	}
	if !fi.IsDir() {
		return []Candidate{{Dir{Path: filepath.Dir(source)}, filepath.Base(source)}}, nil
	}
	return newestIn(ctx, Dir{Path: source})
}

func newestIn(ctx context.Context, store Store) ([]Candidate, error) {
	names, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", store, err)
	}
	var out []Candidate
	for _, n := range newestFirst(names, "") {
		out = append(out, Candidate{store, n.String()})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no linkraft backup in %s (names linkraft-<cluster>-<time>-<index>-<hash>.lkrb)", store)
	}
	return out, nil
}

// RestoreNewest installs the newest good backup of cands with restore. A
// backup that fails its checksum, or that restore refuses (refused: its
// authentication, its snapshot's checksum or its records), is logged with
// why and the next older one is tried; any other error (the node cannot
// take a restore now) ends the attempt. It returns the backup installed.
func RestoreNewest(ctx context.Context, cands []Candidate, restore func([]byte) error, refused func(error) bool, log *slog.Logger) (Candidate, error) {
	var whys []error
	for _, c := range cands {
		data, err := c.Fetch(ctx)
		if err == nil {
			err = restore(data)
			if err == nil {
				return c, nil
			}
			if !refused(err) {
				return Candidate{}, fmt.Errorf("restore %s: %w", c, err)
			}
		} else if !errors.Is(err, ErrChecksum) {
			return Candidate{}, err
		}
		log.Warn("backup not installed; trying the next older one", "backup", c.String(), "why", err)
		whys = append(whys, fmt.Errorf("%s: %w", c, err))
	}
	return Candidate{}, fmt.Errorf("no good backup among %d: %w", len(cands), errors.Join(whys...))
}

// PutBackup stores data, a compressed backup of cluster at index, as
// "linkraft backup --to" does: named as the scheduler names its own, so
// that the scheduler and restores take it as one of theirs.
func PutBackup(ctx context.Context, store Store, cluster string, index uint64, data []byte, now time.Time) (Name, error) {
	sum := sha256.Sum256(data)
	name := Name{Cluster: cluster, Time: now, Index: index, Hash: hex.EncodeToString(sum[:])[:16]}
	if _, ok := ParseName(name.String()); !ok {
		return Name{}, fmt.Errorf("cluster id %q: not a linkraft cluster id", cluster)
	}
	if err := store.Put(ctx, name.String(), bytes.NewReader(data), int64(len(data))); err != nil {
		return Name{}, fmt.Errorf("store %s in %s: %w", name, store, err)
	}
	return name, nil
}
