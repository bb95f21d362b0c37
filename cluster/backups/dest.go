package backups

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Open is the Store a --backup-to names: s3://bucket/prefix, or a
// directory.
func Open(ctx context.Context, dest string, opts S3Options) (Store, error) {
	if dest == "" {
		return nil, errors.New("no backup destination")
	}
	if !strings.HasPrefix(dest, "s3://") {
		if strings.Contains(dest, "://") {
			return nil, fmt.Errorf("backup destination %q: want a directory or s3://bucket/prefix", dest)
		}
		return Dir{Path: dest}, nil
	}
	bucket, key, err := splitS3(dest)
	if err != nil {
		return nil, err
	}
	return NewS3(ctx, bucket, key, opts)
}

// splitS3 splits s3://bucket/key.
func splitS3(dest string) (bucket, key string, err error) {
	u, err := url.Parse(dest)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("backup destination %q: want s3://bucket/prefix", dest)
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), nil
}
