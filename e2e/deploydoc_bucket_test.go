package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/linkraft/linkraft/cluster/backups"
	"github.com/linkraft/linkraft/cluster/backups/s3test"
)

// TestDeployDocBucketS3 is the operator's day with backups to a bucket:
// docs/DEPLOY.md's "Scheduled backups to a bucket" on the first cluster,
// against a real S3-compatible server (SeaweedFS) holding the doc's
// bucket, then its "Disaster recovery": the three VMs lost, three new ones
// built with their usual files plus one line, started in any order.
func TestDeployDocBucketS3(t *testing.T) {
	skipIfShort(t)
	srv := s3test.Start(t)
	srv.Bucket("acme-backups")
	d := newDeployDoc(t)
	b := &bucketDay{d: d, srv: srv}
	d.runDay(t, append(d.firstDay(),
		docStep{"scheduled backups to a bucket", b.backups},
		docStep{"disaster recovery from the bucket", b.recover},
	))
}

type bucketDay struct {
	d    *deployDoc
	srv  *s3test.Server
	kept string // a code the backup holds
}

// bucketFill are the operator's own values for the doc's placeholders: the
// server's endpoint and key, and an interval the test can wait for.
func (b *bucketDay) bucketFill() map[string]string {
	return map[string]string{
		"https://s3.eu-central-1.amazonaws.com": b.srv.Endpoint,
		"AWS_ACCESS_KEY_ID=...":                 "AWS_ACCESS_KEY_ID=" + s3test.AccessKey,
		"AWS_SECRET_ACCESS_KEY=...":             "AWS_SECRET_ACCESS_KEY=" + s3test.SecretKey,
		"LINKRAFT_BACKUP_INTERVAL=1h":           "LINKRAFT_BACKUP_INTERVAL=2s",
	}
}

// appendEnv adds recipe name, rendered for m, to m's environment file.
func (b *bucketDay) appendEnv(t *testing.T, m *simHost, name string) {
	t.Helper()
	f, err := os.OpenFile(m.path("etc/linkraft.env"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(b.d.render(t, m, name, nil, b.bucketFill())); err != nil {
		t.Fatal(err)
	}
}

// newestBackupTime is the time in the newest backup's name in the bucket.
func (b *bucketDay) newestBackupTime(t *testing.T) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b.srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("acme-backups"), Prefix: aws.String("linkraft/")})
	if err != nil {
		t.Fatalf("list the bucket: %v", err)
	}
	var newest time.Time
	for _, o := range out.Contents {
		if n, ok := backups.ParseName(strings.TrimPrefix(aws.ToString(o.Key), "linkraft/")); ok && n.Time.After(newest) {
			newest = n.Time
		}
	}
	return newest
}

func (b *bucketDay) backups(t *testing.T) {
	d := b.d
	for _, m := range d.first3() {
		b.appendEnv(t, m, "bucket-env")
		d.exec(t, m, "restart", "", "systemctl restart linkraft\n", time.Minute)
		d.requireVoters(t, m, firstIDs, 30*time.Second)
	}
	b.kept = d.shorten(t, d.vm("lr2"), "https://example.com/kept-in-the-bucket")
	made := time.Now()
	if !eventually(30*time.Second, func() bool { return b.newestBackupTime(t).After(made) }) {
		t.Fatalf("no backup in s3://acme-backups/linkraft/ within 30 s of a create (interval 2 s); newest: %v", b.newestBackupTime(t))
	}
}

func (b *bucketDay) recover(t *testing.T) {
	d := b.d
	// All three VMs are gone; new ones are built as sections 2-3 say,
	// their environment files as before with the bucket's settings, and
	// the one line of the disaster recovery.
	for _, m := range d.first3() {
		m.stopServices()
		if err := os.Rename(m.root, m.root+".lost"); err != nil {
			t.Fatal(err)
		}
		fresh := newMachine(t, d.dir, d.shims, m.name, m.ip, true)
		d.vms[m.name] = fresh
		d.buildVM(t, fresh)
		b.appendEnv(t, fresh, "bucket-env")
		b.appendEnv(t, fresh, "restore-from-env")
	}
	for i := len(firstIDs) - 1; i >= 0; i-- { // any order: the last first
		d.run(t, d.vm(firstIDs[i]), "first-start")
	}
	var out string
	ok := rerunUntil(30*time.Second, func() bool {
		// grep says 1 where a journal has no such line: two of three.
		out, _ = d.try(t, d.ws, "disaster-recovery-log", "", d.render(t, d.ws, "disaster-recovery-log", nil, nil), time.Minute)
		return strings.Contains(out, "restored the newest good backup")
	})
	if !ok {
		t.Fatalf("the journals do not say a node restored the newest good backup:\n%s", out)
	}
	if n := strings.Count(out, "restored the newest good backup"); n != 1 {
		t.Errorf("%d nodes say they restored; want one:\n%s", n, out)
	}
	d.requireVoters(t, d.vm("lr1"), firstIDs, 30*time.Second)
	for _, m := range d.first3() {
		if got := d.redirect(m, b.kept); got != "https://example.com/kept-in-the-bucket" {
			t.Errorf("after the recovery, %s redirects %s to %q; want the backup's link", m.name, b.kept, got)
		}
	}
}
