// Package s3test runs a real S3-compatible server, SeaweedFS's weed, for
// tests: backups are tested against a server that signs, lists and fails
// as a real one does, never against a mock. The binary is LINKRAFT_WEED
// when set (the Makefile sets it), else the module's .tools/weed, which
// `make weed` builds. Without it a test fails, saying how to get it,
// unless LINKRAFT_SKIP_REAL_PARTS=1 asks for the real parts to be skipped
// (a skip that a plain `go test ./...` would not show is no check at all).
// A test that starts it has S3 in its name: `make test` runs those once
// weed is built, and the others while it builds.
package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Credentials of the server's one identity; tests put them in the
// environment, where linkraft reads them.
const (
	AccessKey = "linkraft-test"
	SecretKey = "linkraft-test-secret-key"
)

// Server is a running weed server with its S3 gateway.
type Server struct {
	Endpoint string // http://127.0.0.1:port
	bin, dir string
	ports    []int
	cmd      *exec.Cmd
	t        testing.TB
}

// Binary is weed's path. Without one the test fails, or skips where
// LINKRAFT_SKIP_REAL_PARTS=1 or -short says to.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("LINKRAFT_WEED")
	if bin == "" {
		bin = moduleWeed()
	}
	if _, err := os.Stat(bin); err != nil {
		const why = "no S3-compatible server (SeaweedFS's weed, built by `make weed` into .tools/weed, or LINKRAFT_WEED)"
		if testing.Short() || os.Getenv("LINKRAFT_SKIP_REAL_PARTS") == "1" {
			t.Skip(why + ": skipped as asked")
		}
		t.Fatal(why + ": run `make weed` (or `make test`), or set LINKRAFT_SKIP_REAL_PARTS=1 to skip the tests against real servers")
	}
	return bin
}

// moduleWeed is .tools/weed in the module above the working directory,
// or "" when there is no module.
func moduleWeed() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".tools", "weed")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Start runs a weed server on loopback with every port its own, and
// stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{bin: Binary(t), dir: t.TempDir(), t: t}
	// master, volume, filer, s3, each with a gRPC port.
	for range 8 {
		s.ports = append(s.ports, freePort(t))
	}
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(s.ports[3])
	config := filepath.Join(s.dir, "s3.json")
	identities := fmt.Sprintf(`{"identities":[{"name":"linkraft","credentials":[{"accessKey":%q,"secretKey":%q}],`+
		`"actions":["Admin","Read","Write","List","Tagging"]}]}`, AccessKey, SecretKey)
	if err := os.WriteFile(config, []byte(identities), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	t := s.t
	t.Helper()
	p := s.ports
	log, err := os.OpenFile(filepath.Join(s.dir, "weed.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	s.cmd = exec.Command(s.bin, "server", "-s3", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false",
		"-dir="+filepath.Join(s.dir, "data"), "-volume.max=64", "-master.volumeSizeLimitMB=64",
		fmt.Sprintf("-master.port=%d", p[0]), fmt.Sprintf("-master.port.grpc=%d", p[4]),
		fmt.Sprintf("-volume.port=%d", p[1]), fmt.Sprintf("-volume.port.grpc=%d", p[5]),
		fmt.Sprintf("-filer.port=%d", p[2]), fmt.Sprintf("-filer.port.grpc=%d", p[6]),
		fmt.Sprintf("-s3.port=%d", p[3]), fmt.Sprintf("-s3.port.grpc=%d", p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config="+filepath.Join(s.dir, "s3.json"))
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start weed: %v", err)
	}
	// Up when a request is answered (unsigned: AccessDenied is an answer).
	for deadline := time.Now().Add(60 * time.Second); ; {
		c, err := net.DialTimeout("tcp", s.Endpoint[len("http://"):], time.Second)
		if err == nil {
			c.Close()
			if s.ready() {
				return
			}
		}
		if time.Now().After(deadline) {
			s.Stop()
			logged, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
			t.Fatalf("weed's S3 gateway did not take an object within 60 s; its log:\n%s", logged)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probeBucket holds the object ready writes.
const probeBucket = "s3test-probe"

// ready reports whether an object can be written: the gateway answers
// before its volume server has registered with the master, and a put
// then waits.
func (s *Server) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := s.Client()
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(probeBucket)}); err != nil {
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(probeBucket)}); err != nil {
			return false
		}
	}
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(probeBucket), Key: aws.String("probe"), Body: strings.NewReader("ok")})
	return err == nil
}

// Stop ends the server (its data stays, for Restart).
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the stopped server again on its ports and data.
func (s *Server) Restart() { s.start() }

// Client is an S3 client of the server, for a test's own looks.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint), Region: "us-east-1", UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// Bucket makes a bucket.
func (s *Server) Bucket(name string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		s.t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Env is the environment a linkraft process needs to reach the server.
func Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey, "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
