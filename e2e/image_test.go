package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImage builds the container image from the Dockerfile the way
// `make image` does and runs it: the container must become healthy through
// its own HEALTHCHECK command, hand out its admin key from the volume, and
// create and redirect a link.
//
// It drives Debian's podman with runc, as this machine and CI can: vfs
// storage (no overlay mounts), no registry (the image is FROM scratch) and
// a containers.conf without the default ulimits and pids limit, which runc
// cannot apply here (crun fails on setrlimit and on hybrid cgroups). Its
// storage is a temporary directory, so nothing outlives the test.
func TestImage(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("no %s on PATH: the image test builds and runs the container image with Debian's podman and runc; "+
				"install them with `apt-get install podman runc` (.ci/run and `make deps` do)", tool)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\npids_limit = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// podman runs one command with the test's storage and runtime, bounded.
	podman := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		full := append([]string{
			"--storage-driver", "vfs", "--root", filepath.Join(dir, "storage"),
			"--runroot", filepath.Join(dir, "run"), "--runtime", "runc",
		}, args...)
		cmd := exec.CommandContext(ctx, "podman", full...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
		cmd.WaitDelay = 5 * time.Second
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			err = fmt.Errorf("podman %s: no result within %s", args[0], timeout)
		}
		return string(out), err
	}

	// The build context `make image` prepares: the static binary and an
	// empty data/ that becomes the user's /data.
	start := time.Now()
	bctx := filepath.Join(dir, "context")
	if err := os.MkdirAll(filepath.Join(bctx, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(goTool(), "build", "-trimpath", "-o", filepath.Join(bctx, "linkraft"), "./cmd/linkraft")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	image := fmt.Sprintf("localhost/linkraft-e2e:%d", os.Getpid())
	if out, err := podman(2*time.Minute, "build", "--format", "docker", "-f", filepath.Join(root, "Dockerfile"), "-t", image, bctx); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := podman(time.Minute, "rmi", "-f", image); err != nil {
			t.Errorf("podman rmi: %v\n%s", err, out)
		}
	})
	t.Logf("static binary and image built in %s", time.Since(start).Round(100*time.Millisecond))

	// The image's promises, read back from it.
	out, err := podman(30*time.Second, "image", "inspect", "--format", "{{.User}}|{{json .HealthCheck.Test}}|{{.Config.Entrypoint}}{{.Config.Cmd}}", image)
	if err != nil {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	if want := `65532:65532|["CMD","/linkraft","health"]|[/linkraft][serve]`; strings.TrimSpace(out) != want {
		t.Errorf("image user|healthcheck|entrypoint+cmd = %q, want %q", strings.TrimSpace(out), want)
	}

	// One node on the host's network, on ports of its own: everything on
	// loopback, so no cluster key is needed. LINKRAFT_HTTP_ADDR is also
	// where the HEALTHCHECK's `linkraft health` looks.
	n := newNode(t, "image")
	name := fmt.Sprintf("linkraft-e2e-%d", os.Getpid())
	if out, err := podman(time.Minute, "run", "-d", "--name", name, "--network", "host",
		"-e", "LINKRAFT_HTTP_ADDR="+n.httpAddr, "-e", "LINKRAFT_RAFT_ADDR="+n.raftAddr,
		"-e", "LINKRAFT_GOSSIP_ADDR="+n.gossipAddr, "-e", "LINKRAFT_CLICK_FLUSH_INTERVAL=200ms",
		image); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := podman(30*time.Second, "logs", name)
			t.Logf("container log:\n%s", logs)
		}
		// -v: the anonymous /data volume goes with the container.
		if out, err := podman(time.Minute, "rm", "-f", "-v", "-t", "10", name); err != nil {
			t.Errorf("podman rm: %v\n%s", err, out)
		}
	})

	// Healthy by the image's own check, within a bound.
	runStart := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := podman(20*time.Second, "healthcheck", "run", name)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container not healthy 30 s after start: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("healthy %s after podman run", time.Since(runStart).Round(100*time.Millisecond))
	if h := n.health(t); h.Status != "healthy" || h.NodeID != "node1" {
		t.Errorf("/health = %+v, want healthy node1 (the image's LINKRAFT_ID)", h)
	}

	// The first leader writes the admin key into the volume (/health may
	// answer a moment before the election); podman cp fetches it, since the
	// image has no shell to cat it with.
	keyFile := filepath.Join(dir, "admin.key")
	deadline = time.Now().Add(20 * time.Second)
	for {
		out, err := podman(20*time.Second, "cp", name+":/data/admin.key", keyFile)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no /data/admin.key 20 s after the node was healthy: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	n.credential = strings.TrimSpace(string(key))
	l := n.createURL(t, "https://example.com/from-a-container")
	n.requireRedirect(t, l.ShortCode, "https://example.com/from-a-container")

	// A graceful stop: the node handles SIGTERM as PID 1 and exits 0.
	if out, err := podman(time.Minute, "stop", "-t", "20", name); err != nil {
		t.Fatalf("podman stop: %v\n%s", err, out)
	}
	if out, err := podman(30*time.Second, "inspect", "--format", "{{.State.ExitCode}}", name); err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("exit code after podman stop: %q (%v), want 0", strings.TrimSpace(out), err)
	}
}
