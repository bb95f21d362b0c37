package backups

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// A backup's object name says what the scheduler needs to know of it
// without reading it, so that any node that leads next knows it too:
//
//	linkraft-<cluster id>-<UTC time, ms>-<applied index>-<SHA-256 of the object, 16 hex digits>.lkrb
//
// The cluster id keeps this cluster's backups apart from others' in the
// same place (retention touches only its own); the time is when the
// interval's backup was taken, from which the next one is due; the index
// and the hash tell an unchanged state: the index at once (nothing
// applied since), the hash after encoding (entries applied that changed
// nothing, such as a new leader's). The hash is also the object's
// checksum, checked before a restore, and before the scheduler counts an
// object it did not write. Nothing in the name is authenticated: the
// scheduler trusts a name only as far as DESIGN.md says.
type Name struct {
	Cluster string
	Time    time.Time
	Index   uint64
	Hash    string
}

const timeLayout = "20060102T150405.000Z"

var nameRE = regexp.MustCompile(`^linkraft-([0-9a-f]{32})-([0-9]{8}T[0-9]{6}\.[0-9]{3}Z)-([0-9]{1,20})-([0-9a-f]{16})\.lkrb$`)

// String is the object name the backup is stored under.
func (n Name) String() string {
	return fmt.Sprintf("linkraft-%s-%s-%d-%s.lkrb", n.Cluster, n.Time.UTC().Format(timeLayout), n.Index, n.Hash)
}

// ParseName reads a backup's object name; ok is false for any other name.
func ParseName(s string) (n Name, ok bool) {
	m := nameRE.FindStringSubmatch(s)
	if m == nil {
		return Name{}, false
	}
	t, err := time.Parse(timeLayout, m[2])
	if err != nil {
		return Name{}, false
	}
	index, err := strconv.ParseUint(m[3], 10, 64)
	if err != nil {
		return Name{}, false
	}
	return Name{Cluster: m[1], Time: t, Index: index, Hash: m[4]}, true
}

// newestFirst parses the backups among names, of cluster (any cluster
// when ""), newest first.
func newestFirst(names []string, cluster string) []Name {
	var out []Name
	for _, s := range names {
		if n, ok := ParseName(s); ok && (cluster == "" || n.Cluster == cluster) {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b Name) int {
		return cmp.Or(b.Time.Compare(a.Time), cmp.Compare(b.Index, a.Index), cmp.Compare(b.Hash, a.Hash))
	})
	return out
}
