package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/linkraft/linkraft/cluster/backups"
)

// s3Flags are how the backup commands reach an S3-compatible destination;
// credentials come from the AWS environment or shared credentials file.
type s3Flags struct{ endpoint, region string }

func (f *s3Flags) options(timeout time.Duration) backups.S3Options {
	return backups.S3Options{Endpoint: f.endpoint, Region: f.region, Timeout: timeout}
}

// backupTo is "linkraft backup --to DEST": the compressed backup, named as
// scheduled backups are, stored in a directory or under an s3:// prefix.
func backupTo(o *adminOpts, fs *flag.FlagSet, s3 *s3Flags, dest string, stderr io.Writer) int {
	c, err := o.client("backup", stderr)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	store, err := backups.Open(ctx, dest, s3.options(o.timeout))
	if err != nil {
		return usageError(fs, stderr, "--to: %v", err)
	}
	// The index is read before the backup is taken, so it is at most the
	// backup's own: a later scheduled backup then never takes a changed
	// state for this one.
	health, err := c.do(http.MethodGet, "/health", "", nil)
	if err != nil {
		return fail("backup", stderr, err)
	}
	var h struct {
		ClusterID    string `json:"cluster_id"`
		AppliedIndex uint64 `json:"applied_index"`
	}
	if err := json.Unmarshal(health, &h); err != nil {
		return fail("backup", stderr, fmt.Errorf("the node's /health: %w", err))
	}
	if h.ClusterID == "" {
		// /health names the cluster only to a caller whose credential the
		// node accepts; without the id the backup could not be named.
		return fail("backup", stderr, errors.New("the node's /health did not name its cluster: "+
			"it does so for a credential it accepts (is the key new to this node, or not given?)"))
	}
	data, err := c.do(http.MethodGet, "/admin/backup?compressed=true", "", nil)
	if err != nil {
		return fail("backup", stderr, err)
	}
	name, err := backups.PutBackup(ctx, store, h.ClusterID, h.AppliedIndex, data, time.Now())
	if err != nil {
		return fail("backup", stderr, err)
	}
	fmt.Fprintf(stderr, "wrote %d bytes to %s\n", len(data), backups.Candidate{Store: store, Name: name.String()})
	return 0
}

// restoreFrom is "linkraft restore --from SOURCE": the newest good backup
// of a file, a directory or an s3:// object or prefix. A backup whose
// checksum fails, or that the cluster refuses (authentication, damage, a
// record no client could write), is reported with why, and the next older
// one is tried.
func restoreFrom(o *adminOpts, fs *flag.FlagSet, s3 *s3Flags, source, path string, stdout, stderr io.Writer) int {
	c, err := o.client("restore", stderr)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	cands, err := backups.Candidates(ctx, source, s3.options(o.timeout))
	if err != nil {
		return fail("restore", stderr, err)
	}
	var answer []byte
	restore := func(backup *io.SectionReader) error {
		body, err := c.doReader(http.MethodPost, path, "application/octet-stream", backup)
		answer = body
		return err
	}
	refused := func(err error) bool {
		var ae *adminError
		return errors.As(err, &ae) && ae.status == http.StatusBadRequest
	}
	log, _ := newLogger("warn", "text", stderr)
	// Each candidate is fetched into a file of the temporary directory and
	// sent from there: memory stays bounded whatever its size.
	cand, err := backups.RestoreFile(ctx, cands, "", restore, refused, log)
	if err != nil {
		return fail("restore", stderr, err)
	}
	fmt.Fprintf(stderr, "restored %s\n", cand)
	stdout.Write(answer)
	fmt.Fprintln(stdout)
	return 0
}
