package faults

import (
	"fmt"
	"sort"
	"time"

	"github.com/valyala/fasthttp"
)

// maxHistoryCodes bounds how many edited codes the final history check
// asks every node about.
const maxHistoryCodes = 20

// editedSample returns up to maxHistoryCodes codes that an edit answered
// 200 changed, that were acknowledged and that no delete touched: the most
// edited first.
func editedSample(ops []Op) []string {
	type edited struct {
		code  string
		edits int
	}
	var all []edited
	for code, cops := range codeIndex(ops) {
		_, _, acked := ackedTarget(cops)
		_, deleted := deletedBy(cops)
		if n := len(ackedEdits(cops)); acked && !deleted && n > 0 {
			all = append(all, edited{code, n})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].edits != all[j].edits {
			return all[i].edits > all[j].edits
		}
		return all[i].code < all[j].code
	})
	var out []string
	for _, e := range all[:min(len(all), maxHistoryCodes)] {
		out = append(out, e.code)
	}
	return out
}

// editHistoryAnomalies asks every member, after the final heal, for the
// history and the redirect of a sample of edited codes and checks that
// they agree (CheckEditHistories).
func (c *cluster) editHistoryAnomalies(ops []Op) []Anomaly {
	codes := editedSample(ops)
	views := map[string]map[string]EditedView{}
	for _, n := range c.nodes() {
		views[n.id] = map[string]EditedView{}
		for _, code := range codes {
			views[n.id][code] = c.editedView(n, code)
		}
	}
	c.t.Logf("edit histories: %d edited codes checked on %d nodes", len(codes), len(views))
	return CheckEditHistories(ops, views)
}

// editedView fetches one code's history and redirect from n; a request
// that got no answer is tried again (3 tries).
func (c *cluster) editedView(n *fnode, code string) EditedView {
	var v EditedView
	var a answer
	for try := 0; try < 3; try++ {
		if a = c.cl.do(fasthttp.MethodGet, n.httpAddr, "/api/v1/urls/"+code+"/history", nil, 5*time.Second); a.err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	v.Status = a.status
	switch {
	case a.err != nil:
		v.Err = a.err.Error()
	case a.status != 200:
		v.Err = fmt.Sprintf("%.200s", a.body)
	default:
		var err error
		if v.Versions, err = ParseVersions(a.body); err != nil {
			v.Status, v.Err = 0, err.Error()
		}
	}
	for try := 0; try < 3; try++ {
		if r := c.cl.do(fasthttp.MethodHead, n.httpAddr, "/"+code, nil, 5*time.Second); r.err == nil {
			v.Redirect, v.Location = r.status, r.location
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return v
}
