package backups

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// S3Options are how an S3-compatible destination is reached beside its
// s3://bucket/prefix. Credentials are not among them: they come from the
// AWS environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN) or the shared credentials file (AWS_PROFILE,
// AWS_SHARED_CREDENTIALS_FILE), as the AWS tools read them, so no secret
// is ever in a flag, a process list or a log.
type S3Options struct {
	// Endpoint is the server's URL (https://s3.example.com); "" is AWS.
	// Requests name the bucket in the path, which every S3-compatible
	// server understands.
	Endpoint string
	// Region signs the requests; "" is AWS_REGION, else us-east-1.
	Region string
	// Timeout bounds each request (0: 5 minutes: a backup may be large).
	Timeout time.Duration
}

// S3 is a Store under a prefix of a bucket.
type S3 struct {
	client  *s3.Client
	bucket  string
	prefix  string // "" or ending in "/"
	timeout time.Duration
}

// maxPages bounds a listing: maxObjects at S3's 1000 a page.
const maxPages = maxObjects / 1000

// NewS3 reaches bucket under prefix.
func NewS3(ctx context.Context, bucket, prefix string, opts S3Options) (*S3, error) {
	load := []func(*config.LoadOptions) error{
		// Off EC2, the instance metadata service would only delay an
		// error about missing credentials by seconds.
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled),
	}
	if opts.Region != "" {
		load = append(load, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3 configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = true
		// S3-compatible servers do not all know the SDK's newer
		// checksums; each backup carries its own (its name's hash).
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	return &S3{client: client, bucket: bucket, prefix: prefix, timeout: timeout}, nil
}

// String is the bucket and prefix as an s3:// URL.
func (s *S3) String() string { return "s3://" + s.bucket + "/" + s.prefix }

// Put is Store's: one PutObject under the prefix.
func (s *S3) Put(ctx context.Context, name string, r io.ReadSeeker, size int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + name), Body: r, ContentLength: aws.Int64(size),
		ContentType: aws.String("application/octet-stream"),
	})
	return s3Error(err)
}

// List names the objects directly under the prefix (not in "folders"
// below it), at most maxObjects.
func (s *S3) List(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var names []string
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix), Delimiter: aws.String("/"),
	})
	for i := 0; pages.HasMorePages(); i++ {
		if i == maxPages {
			return nil, fmt.Errorf("list %s: more than %d objects", s, maxObjects)
		}
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s3Error(err)
		}
		for _, o := range page.Contents {
			names = append(names, strings.TrimPrefix(aws.ToString(o.Key), s.prefix))
		}
	}
	return names, nil
}

// Get is Store's: the object's body as it arrives. The request's time
// limit runs until the caller closes it.
func (s *S3) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + name)})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s%s: %w", s, name, s3Error(err))
	}
	return &s3Body{body: out.Body, cancel: cancel, what: s.String() + name}, nil
}

// s3Body is an object's body that says which object a failed read was of,
// and ends its request when closed.
type s3Body struct {
	body   io.ReadCloser
	cancel context.CancelFunc
	what   string
}

func (b *s3Body) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("read %s: %w", b.what, err)
	}
	return n, err
}

func (b *s3Body) Close() error {
	err := b.body.Close()
	b.cancel()
	return err
}

// Delete is Store's.
func (s *S3) Delete(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + name)})
	return s3Error(err)
}

// s3Error makes a missing object ErrNotFound and keeps the server's code
// and message, which say what an operator must fix (AccessDenied,
// NoSuchBucket, InvalidAccessKeyId, ...).
func s3Error(err error) error {
	if err == nil {
		return nil
	}
	var noKey *types.NoSuchKey
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &noKey) || (errors.As(err, &status) && status.HTTPStatusCode() == http.StatusNotFound && !isCode(err, "NoSuchBucket")) {
		return fmt.Errorf("%w (%v)", ErrNotFound, err)
	}
	return err
}

func isCode(err error, code string) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == code
}
