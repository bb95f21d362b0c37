package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/linkraft/linkraft/cluster/backups"
	"github.com/linkraft/linkraft/cluster/backups/s3test"
)

// bucketView lists and changes the test bucket as an operator's S3 tool
// would.
type bucketView struct {
	t      *testing.T
	srv    *s3test.Server
	bucket string
	prefix string
}

func (b bucketView) names() []string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := b.srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket), Prefix: aws.String(b.prefix)})
	if err != nil {
		b.t.Fatalf("list the bucket: %v", err)
	}
	var names []string
	for _, o := range out.Contents {
		names = append(names, strings.TrimPrefix(aws.ToString(o.Key), b.prefix))
	}
	return names
}

func (b bucketView) get(name string) []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := b.srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(b.prefix + name)})
	if err != nil {
		b.t.Fatalf("get %s: %v", name, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return data
}

func (b bucketView) put(name string, data []byte) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := b.srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(b.prefix + name),
		Body: bytes.NewReader(data)}); err != nil {
		b.t.Fatalf("put %s: %v", name, err)
	}
}

// backupCount reads linkraft_backups_total{outcome} from a node.
func backupCount(t *testing.T, n *node, outcome string) int {
	t.Helper()
	r := n.get(t, "/metrics")
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	prefix := `linkraft_backups_total{outcome="` + outcome + `"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	return 0
}

// warnings are /health's warnings on a node.
func warnings(t *testing.T, n *node) []string {
	t.Helper()
	var h struct {
		Warnings []string `json:"warnings"`
	}
	r := n.get(t, "/health")
	if err := json.Unmarshal(r.body, &h); err != nil {
		t.Fatalf("/health: %v", err)
	}
	return h.Warnings
}

func leaderOf(t *testing.T, nodes []*node) *node {
	t.Helper()
	for _, n := range nodes {
		if n.health(t).Role == "leader" {
			return n
		}
	}
	t.Fatal("no leader")
	return nil
}

// TestBackupsToS3 runs a three-node cluster that backs up to a real
// S3-compatible server (SeaweedFS) every two seconds, as an operator
// would run it every hour: the leader alone writes, a state that did not
// change is not written again, the newest three are kept, a tampered or
// damaged backup is refused saying why (and the next older one restores),
// a leader killed between intervals loses no change and writes no state
// twice, the server down makes the leader say backup_overdue while
// redirects go on, and a cluster whose three data dirs are gone comes back from the
// bucket with one command per node (docs/DEPLOY.md, "Disaster recovery").
func TestBackupsToS3(t *testing.T) {
	skipIfShort(t)
	srv := s3test.Start(t)
	srv.Bucket("linkraft")
	bucket := bucketView{t: t, srv: srv, bucket: "linkraft", prefix: "prod/"}
	dest := "s3://linkraft/prod"
	backupFlags := map[string]string{
		"backup-to": dest, "backup-interval": "2s", "backup-retain": "3", "backup-s3-endpoint": srv.Endpoint,
	}
	env := s3test.Env()
	nodes := startClusterEnv(t, 3, backupFlags, env)

	// Scheduled backups, the leader's alone.
	l := nodes[0].createURL(t, "https://example.com/backed-up")
	leader := leaderOf(t, nodes)
	if !eventually(30*time.Second, func() bool { return backupCount(t, leader, backups.OutcomeWritten) >= 1 }) {
		t.Fatalf("no backup written by the leader %s within 30 s; bucket: %v", leader.id, bucket.names())
	}
	for _, n := range nodes {
		if n != leader && strings.Contains(n.out.String(), "backup written") {
			t.Errorf("follower %s wrote a backup", n.id)
		}
	}

	// Nothing changed: intervals pass, skipped, nothing new in the bucket.
	// (The first backup may have been taken before the create; the first
	// skip comes after the one that holds it.)
	if !eventually(30*time.Second, func() bool { return backupCount(t, leader, backups.OutcomeSkipped) >= 1 }) {
		t.Fatal("no interval skipped within 30 s while nothing changed")
	}
	written, before := backupCount(t, leader, backups.OutcomeWritten), bucket.names()
	skipped := backupCount(t, leader, backups.OutcomeSkipped)
	if !eventually(30*time.Second, func() bool { return backupCount(t, leader, backups.OutcomeSkipped) >= skipped+2 }) {
		t.Fatal("no interval skipped within 30 s while nothing changed")
	}
	if got := backupCount(t, leader, backups.OutcomeWritten); got != written || len(bucket.names()) != len(before) {
		t.Fatalf("an unchanged state was written again: %d backups written (was %d), bucket %v (was %v)", got, written, bucket.names(), before)
	}

	// Retention: five changed intervals leave the newest three.
	var last link
	for i := range 5 {
		last = nodes[i%3].createURL(t, fmt.Sprintf("https://example.com/change-%d", i))
		w := backupCount(t, leader, backups.OutcomeWritten)
		if !eventually(30*time.Second, func() bool { return backupCount(t, leader, backups.OutcomeWritten) > w }) {
			t.Fatalf("change %d: no backup written within 30 s", i)
		}
	}
	names := bucket.names()
	if len(names) != 3 {
		t.Fatalf("bucket holds %v; want the newest 3", names)
	}

	// A leader killed between intervals: the next one reads from the
	// bucket what the newest backup holds, backs up the next change, and
	// never writes a state the bucket already has.
	held := newestBackup(t, bucket.names())
	leader.kill9()
	var survivors []*node
	for _, n := range nodes {
		if n != leader {
			survivors = append(survivors, n)
		}
	}
	waitOneLeader(t, leaderWaitTimeout, survivors...)
	survivors[0].createURL(t, "https://example.com/after-the-leader-died")
	if !eventually(30*time.Second, func() bool { return newestBackup(t, bucket.names()).Index > held.Index }) {
		t.Fatalf("no backup of the change within 30 s of the leader's death; bucket %v", bucket.names())
	}
	hashes := map[string]bool{}
	for _, s := range bucket.names() {
		n, _ := backups.ParseName(s)
		if hashes[n.Hash] {
			t.Fatalf("the same state written twice across the leader change: %v", bucket.names())
		}
		hashes[n.Hash] = true
	}
	leader.restartUntil(leaderKnown)
	leader = leaderOf(t, nodes)
	names = bucket.names()

	// A tampered backup (its MAC changed, its checksum made right) and a
	// damaged one (a byte flipped in storage), each named as the newest:
	// restore --from refuses both, saying which file and why, and
	// restores the newest good one.
	good := newestBackup(t, names)
	data := bucket.get(good.String())
	tampered := bytes.Clone(data)
	tampered[len(tampered)-1] ^= 1
	forged := named(good, 1, tampered)
	bucket.put(forged.String(), tampered)
	damaged := named(good, 2, data)
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 1
	bucket.put(damaged.String(), flipped)
	nodes[1].createURL(t, "https://example.com/after-the-backups")
	out, err := runCommand(t, time.Minute, env, "restore", "--from", dest+"/", "--backup-s3-endpoint", srv.Endpoint,
		"--addr", nodes[1].httpAddr, "--admin-token", e2eToken)
	if err != nil {
		t.Fatalf("restore --from: %v\n%s", err, out)
	}
	for _, want := range []string{damaged.String(), "checksum mismatch", forged.String(),
		"not made by a cluster holding this cluster key", "restored " + dest + "/" + good.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("restore --from's output lacks %q:\n%s", want, out)
		}
	}
	for _, n := range nodes {
		if !eventually(10*time.Second, func() bool { return n.get(t, "/"+last.ShortCode).status == http.StatusFound }) {
			t.Fatalf("%s: %s does not redirect after the restore", n.id, last.ShortCode)
		}
	}

	// The server down: the leader says backup_overdue after two intervals,
	// /health stays 200 and redirects go on.
	srv.Stop()
	nodes[2].createURL(t, "https://example.com/while-s3-is-down")
	leader = leaderOf(t, nodes)
	if !eventually(30*time.Second, func() bool { return slices.Contains(warnings(t, leader), "backup_overdue") }) {
		t.Fatalf("the leader %s does not say backup_overdue within 30 s of the server going down", leader.id)
	}
	for _, n := range nodes {
		n.requireRedirect(t, l.ShortCode, l.OriginalURL)
		if h := n.get(t, "/health"); h.status != http.StatusOK {
			t.Errorf("%s: /health %v while backups are overdue; want 200", n.id, h)
		}
	}
	srv.Restart()
	if !eventually(60*time.Second, func() bool { return len(warnings(t, leader)) == 0 }) {
		t.Fatalf("backup_overdue stays after the server came back: %v", warnings(t, leader))
	}

	// Disaster recovery: every node and data dir gone. One node starts the
	// cluster alone from the bucket's newest good backup, the others join
	// it (the same cluster key, kept with the backups).
	w := backupCount(t, leader, backups.OutcomeWritten)
	final := nodes[0].createURL(t, "https://example.com/last-before-the-disaster")
	if !eventually(30*time.Second, func() bool { return backupCount(t, leader, backups.OutcomeWritten) > w }) {
		t.Fatal("the last change was not backed up within 30 s")
	}
	key := nodes[0].clusterKey
	for _, n := range nodes {
		n.kill()
	}
	restored := restoreCluster(t, key, dest, backupFlags, env)
	for _, n := range restored {
		for _, want := range []link{l, last, final} {
			if !eventually(20*time.Second, func() bool { return n.get(t, "/"+want.ShortCode).status == http.StatusFound }) {
				t.Fatalf("restored %s: %s does not redirect", n.id, want.ShortCode)
			}
			n.requireRedirect(t, want.ShortCode, want.OriginalURL)
		}
	}
}

// newestBackup is the newest of the backup names.
func newestBackup(t *testing.T, names []string) backups.Name {
	t.Helper()
	var newest backups.Name
	for _, s := range names {
		if n, ok := backups.ParseName(s); ok && n.Time.After(newest.Time) {
			newest = n
		}
	}
	return newest
}

// named is a name as the newest backup's, later by step ms, recording the
// hash of data: a forger who also makes the checksum right.
func named(n backups.Name, step int, data []byte) backups.Name {
	sum := sha256.Sum256(data)
	n.Time = n.Time.Add(time.Duration(step) * time.Millisecond)
	n.Hash = hex.EncodeToString(sum[:])[:16]
	return n
}

// restoreCluster is docs/DEPLOY.md's disaster recovery on three new,
// empty nodes: each started as the cluster's nodes always are
// (--bootstrap-expect 3, --join of the others, the same cluster key) with
// the same --restore-from. The cluster they form restores once (one node
// logs it), and no node backs up before it.
func restoreCluster(t *testing.T, key, source string, settings map[string]string, env []string) []*node {
	t.Helper()
	all := map[string]string{"restore-from": source, "cluster-key": key}
	for k, v := range settings {
		all[k] = v
	}
	nodes := startClusterEnv(t, 3, all, env)
	// The line is written before the leader serves writes, but reaches the
	// test through a pipe: it may arrive after the node's first answer.
	var restorer *node
	if !eventually(10*time.Second, func() bool {
		restorer = nil
		for _, n := range nodes {
			if strings.Contains(n.out.String(), "restored the newest good backup") {
				restorer = n
			}
		}
		return restorer != nil
	}) {
		t.Fatal("no node of the new cluster restored the backup")
	}
	restores := 0
	for _, n := range nodes {
		restores += strings.Count(n.out.String(), "backup restored")
	}
	if restores != 1 {
		t.Fatalf("the new cluster restored %d times; want once", restores)
	}
	// Its new cluster's empty state, backed up, would be the newest backup.
	out := restorer.out.String()
	if w := strings.Index(out, "backup written"); w >= 0 && w < strings.Index(out, "backup restored") {
		t.Fatalf("%s backed up its state before restoring:\n%s", restorer.id, out)
	}
	return nodes
}
