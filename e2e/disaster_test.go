package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster/backups"
)

// clusterID is the cluster id an authenticated /health shows.
func clusterID(t *testing.T, n *node) string {
	t.Helper()
	var h struct {
		ClusterID string `json:"cluster_id"`
	}
	if err := json.Unmarshal(n.get(t, "/health").body, &h); err != nil || h.ClusterID == "" {
		t.Fatalf("%s: no cluster id in /health: %v", n.id, err)
	}
	return h.ClusterID
}

// backupNames are the backups in dir, by cluster id.
func backupNames(t *testing.T, dir string) map[string][]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	byCluster := map[string][]string{}
	for _, e := range entries {
		if n, ok := backups.ParseName(e.Name()); ok {
			byCluster[n.Cluster] = append(byCluster[n.Cluster], e.Name())
		}
	}
	return byCluster
}

// TestDisasterRecoveryAsOneSetting: all three nodes of a cluster and their
// data dirs are gone; three new nodes start with the cluster's usual flags
// (--bootstrap-expect 3, --join, the cluster key, the backup directory)
// plus the same --restore-from. The cluster they form restores the newest
// backup once, before any write, under a new cluster id: every node serves
// the links and the delete the backup holds, its backups are a new series,
// retention leaves the lost cluster's alone, and restarting every node
// with the same flags restores nothing again (a write made since stays).
func TestDisasterRecoveryAsOneSetting(t *testing.T) {
	skipIfShort(t)
	t.Parallel()
	dir := t.TempDir()
	flags := map[string]string{"backup-to": dir, "backup-interval": "1s", "backup-retain": "1"}
	lost := startCluster(t, 3, flags)
	kept := lost[0].createURL(t, "https://example.com/disaster/kept")
	gone := lost[1].createURL(t, "https://example.com/disaster/gone")
	if r := lost[2].request(t, http.MethodDelete, "/api/v1/urls/"+gone.ShortCode, nil, nil); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: want 204, got %v", r)
	}
	lostID := clusterID(t, lost[0])
	leader := leaderOf(t, lost)
	w := backupCount(t, leader, backups.OutcomeWritten)
	if !eventually(20*time.Second, func() bool { return backupCount(t, leader, backups.OutcomeWritten) > w }) {
		t.Fatal("the delete was not backed up within 20 s")
	}
	key := lost[0].clusterKey
	for _, n := range lost {
		n.kill()
	}
	lostBackups := backupNames(t, dir)[lostID]
	if len(lostBackups) == 0 {
		t.Fatalf("no backup of the lost cluster %s in %s", lostID, dir)
	}

	flags["restore-from"] = dir
	nodes := restoreCluster(t, key, dir, flags, nil)
	newID := clusterID(t, nodes[0])
	if newID == lostID {
		t.Fatalf("the restored cluster kept the lost cluster's id %s; want a new one", lostID)
	}
	for _, n := range nodes {
		if id := clusterID(t, n); id != newID {
			t.Fatalf("%s is in cluster %s, %s in %s", n.id, id, nodes[0].id, newID)
		}
		n.requireRedirect(t, kept.ShortCode, kept.OriginalURL)
		if r := n.get(t, "/"+gone.ShortCode); r.status != http.StatusNotFound {
			t.Fatalf("%s: the deleted %s answers %v; want 404", n.id, gone.ShortCode, r)
		}
	}
	after := nodes[1].createURL(t, "https://example.com/disaster/after")
	if after.ShortCode == kept.ShortCode || after.ShortCode == gone.ShortCode {
		t.Fatalf("a create after the restore got %s, a code the lost cluster handed out", after.ShortCode)
	}
	if !eventually(20*time.Second, func() bool { return len(backupNames(t, dir)[newID]) > 0 }) {
		t.Fatalf("the restored cluster wrote no backup of its own within 20 s: %v", backupNames(t, dir))
	}
	// One more backup of the new series lets retention (1) run over it.
	if !eventually(20*time.Second, func() bool {
		return backupCount(t, leaderOf(t, nodes), backups.OutcomeWritten) >= 2
	}) {
		t.Fatal("the restored cluster did not back up its create within 20 s")
	}
	if got := backupNames(t, dir)[lostID]; len(got) != len(lostBackups) {
		t.Fatalf("the lost cluster's backups went from %v to %v; retention must leave them alone", lostBackups, got)
	}

	// Every node restarts, in reverse order, with the same flags: the
	// cluster has state, so nothing is restored again and the create stays.
	for i := len(nodes) - 1; i >= 0; i-- {
		nodes[i].restartUntil(leaderKnown)
	}
	restores := 0
	for _, n := range nodes {
		if !eventually(20*time.Second, func() bool { return n.get(t, "/"+after.ShortCode).status == http.StatusFound }) {
			t.Fatalf("%s: %s, created after the restore, is gone after a restart", n.id, after.ShortCode)
		}
		restores += strings.Count(n.out.String(), "backup restored")
	}
	if restores != 1 {
		t.Fatalf("the cluster restored %d times over its restarts; want once", restores)
	}
	if id := clusterID(t, nodes[0]); id != newID {
		t.Fatalf("after the restarts the cluster id is %s; want %s", id, newID)
	}
}
