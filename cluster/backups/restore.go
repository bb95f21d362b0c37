package backups

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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

// Fetched is a backup copied into a file of its own and checked against
// the hash its name records. The file has no name once created, so it
// takes no space once closed, a crash included. A restore reads it, not
// the destination: it installs exactly the bytes checked, whatever
// happens to the object meanwhile, and never holds them in memory whole.
type Fetched struct {
	*io.SectionReader
	file *os.File
}

// Close closes the copy, which frees its space.
func (f *Fetched) Close() error { return f.file.Close() }

// Fetch copies the backup into a file in dir ("": the system's temporary
// directory), hashing it as it streams, and when its name records its
// hash, checks it: damage in storage or transfer is found before anything
// is sent to a node (ErrChecksum). The caller closes what it returns. The
// copy ends with the object: a directory's file at the size it had when
// opened, an S3 object at the length its server announced.
func (c Candidate) Fetch(ctx context.Context, dir string) (*Fetched, error) {
	body, err := c.Store.Get(ctx, c.Name)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	f, err := os.CreateTemp(dir, "restore-*")
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", c, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("fetch %s: %w", c, err)
	}
	sum := sha256.New()
	size, err := io.Copy(io.MultiWriter(f, sum), body)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fetch %s: %w", c, err)
	}
	if n, ok := ParseName(c.Name); ok {
		if got := hex.EncodeToString(sum.Sum(nil))[:16]; got != n.Hash {
			f.Close()
			return nil, fmt.Errorf("%w: %s has SHA-256 %s…, its name says %s…: it was damaged in storage or transfer",
				ErrChecksum, c, got, n.Hash)
		}
	}
	return &Fetched{io.NewSectionReader(f, 0, size), f}, nil
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
		// The operator named this file, through a link or not; a
		// directory's own links are never followed (Dir.Get).
		file, err := filepath.EvalSymlinks(source)
		if err != nil {
			return nil, fmt.Errorf("backup source: %w", err)
		}
		return []Candidate{{Dir{Path: filepath.Dir(file)}, filepath.Base(file)}}, nil
	}
	return newestIn(ctx, Dir{Path: source})
}

// newestIn are store's backups, newest first, but for those dated in the
// future: a name's time is not authenticated (a backup's MAC covers its
// bytes), so a genuine backup copied under a later name would be taken
// for the newest forever.
func newestIn(ctx context.Context, store Store) ([]Candidate, error) {
	names, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", store, err)
	}
	var out []Candidate
	future := 0
	latest := time.Now().Add(maxClockSkew)
	for _, n := range newestFirst(names, "") {
		if n.Time.After(latest) {
			future++
			continue
		}
		out = append(out, Candidate{store, n.String()})
	}
	if len(out) == 0 {
		why := ""
		if future > 0 {
			why = fmt.Sprintf("; %d named as dated in the future passed over", future)
		}
		return nil, fmt.Errorf("no linkraft backup in %s (names linkraft-<cluster>-<time>-<index>-<hash>.lkrb)%s", store, why)
	}
	return out, nil
}

// RestoreFile installs the newest good backup of cands with restore. Each
// is fetched into a file in dir (Fetch; the data dir on a node: it is
// owner-only, as a backup must be) and handed to restore as a stream, so
// memory stays bounded whatever an object's size. A backup that fails its
// checksum, or that restore refuses (refused: its authentication, its
// snapshot's checksum or its records), is logged with why and the next
// older one is tried; any other error (the node cannot take a restore
// now) ends the attempt. It returns the backup installed.
func RestoreFile(ctx context.Context, cands []Candidate, dir string, restore func(*io.SectionReader) error,
	refused func(error) bool, log *slog.Logger) (Candidate, error) {
	var whys []error
	for _, c := range cands {
		fetched, err := c.Fetch(ctx, dir)
		if err == nil {
			err = restore(fetched.SectionReader)
			fetched.Close()
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
