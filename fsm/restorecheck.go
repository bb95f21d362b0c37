package fsm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A backup is checked twice before a restore installs it. ReadSnapshot
// refuses what the state machine must never hold (inconsistent indexes,
// unknown values, keys and webhooks Apply would refuse). CheckRecords then
// holds every record to the rules a client's write meets, so a restore
// cannot store what no client could: a backup's bytes come from outside the
// cluster, and whoever wrote them chose every field. Apply's own floor
// (checkTarget, at the level the backup's state was raised to) is part of
// it; the input rules above it (fsm/input, with the node's setting for
// private targets) come in through InputRules, since that package imports
// this one.

// ErrRefusedRecord is a backup holding a record a client's write could
// not have made; the error wrapping it names the record.
var ErrRefusedRecord = errors.New("the backup holds a record this cluster refuses")

// InputRules are the input rules of a client's write that this package does
// not hold itself, with the restoring node's settings.
type InputRules interface {
	// Target checks a URL as stored: a link's target and its rules', a
	// domain's redirects, a webhook's URL. The node's rule on private
	// addresses is part of it.
	Target(url string) error
	// Workspace checks a workspace name a key lists.
	Workspace(name string) error
}

// CheckRecords holds every record of the snapshot to the rules a client's
// write meets, and returns an error wrapping ErrRefusedRecord that names
// the first one that breaks them: links by id, then domains, keys and
// webhooks, each by name or id.
//
//   - a link's target and its rules' targets pass rules.Target and Apply's
//     floor at the state's level (checkTarget); the targets in its
//     history, which are shown but never served, pass that floor;
//   - a domain's redirects pass rules.Target and that floor;
//   - a key's workspaces are "*" alone or names rules.Workspace accepts,
//     sorted and distinct, and an admin key lists "*" alone (it reaches
//     every workspace: a narrower list would only make it look narrower);
//   - a webhook's URL is an http(s) URL that passes rules.Target.
//
// It changes nothing, and reads only the snapshot.
func (s *Snapshot) CheckRecords(rules InputRules) error {
	st := s.s
	var err error
	st.links.recs.scan(true, func(r *record) bool {
		if r.live() {
			if lerr := st.checkLink(r, rules); lerr != nil {
				err = fmt.Errorf("%w: link %q: %v", ErrRefusedRecord, r.code, lerr)
			}
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	domains := []Domain{st.defaultDomain}
	for _, name := range slices.Sorted(maps.Keys(st.domains)) {
		domains = append(domains, st.domains[name])
	}
	for _, d := range domains {
		name := d.Name
		for _, redirect := range []struct{ field, url string }{{"root redirect", d.RootRedirect}, {"not-found redirect", d.NotFoundRedirect}, {"invalid-link redirect", d.InvalidRedirect}} {
			if redirect.url == "" {
				continue
			}
			if err := st.checkStored(redirect.url, rules); err != nil {
				return fmt.Errorf("%w: domain %q: %s: %v", ErrRefusedRecord, name, redirect.field, err)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.keys)) {
		if err := checkKeyWorkspaces(st.keys[id], rules); err != nil {
			return fmt.Errorf("%w: key %q: %v", ErrRefusedRecord, id, err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.hooks.byID)) {
		url := st.hooks.byID[id].hook.URL
		err := checkWebURL(url)
		if err == nil {
			err = rules.Target(url)
		}
		if err != nil {
			return fmt.Errorf("%w: webhook %q: %v", ErrRefusedRecord, id, err)
		}
	}
	return nil
}

// checkLink checks the targets of the link r.
func (st *state) checkLink(r *record, rules InputRules) error {
	if err := st.checkStored(r.url, rules); err != nil {
		return err
	}
	o := st.opts.of(r)
	if o == nil {
		return nil
	}
	for i, rule := range o.Rules {
		if err := st.checkStored(rule.URL, rules); err != nil {
			return fmt.Errorf("rule %d: %v", i+1, err)
		}
	}
	for i, v := range o.History {
		if err := checkTarget(v.URL, st.raised); err != nil {
			return fmt.Errorf("history version %d: %v", i+1, err)
		}
	}
	return nil
}

// checkStored holds a stored target to rules.Target and to Apply's floor
// at the state's level: the input rules take schemes an older level's
// floor refuses.
func (st *state) checkStored(url string, rules InputRules) error {
	if err := rules.Target(url); err != nil {
		return err
	}
	return checkTarget(url, st.raised)
}

// checkKeyWorkspaces holds a key's workspaces to what a key create takes.
func checkKeyWorkspaces(k *APIKey, rules InputRules) error {
	all := slices.Contains(k.Workspaces, AllWorkspaces)
	switch {
	case all && len(k.Workspaces) > 1:
		return errors.New(`workspaces: "*" with other workspaces`)
	case k.Scopes&ScopeAdmin != 0 && !all:
		return fmt.Errorf("an admin key with workspaces %s: an admin key reaches every workspace, so it lists \"*\" alone",
			strings.Join(k.Workspaces, ", "))
	case !slices.IsSorted(k.Workspaces) || len(slices.Compact(slices.Clone(k.Workspaces))) != len(k.Workspaces):
		return errors.New("workspaces: not sorted and distinct")
	}
	if all {
		return nil
	}
	for _, ws := range k.Workspaces {
		if err := rules.Workspace(ws); err != nil {
			return err
		}
	}
	return nil
}
