package httpd

import (
	"runtime"
	"testing"
)

// TestRedirectMetricsCountEachStatus: the redirect route counts every
// answer under its own status, however the statuses alternate, and times
// each one.
func TestRedirectMetricsCountEachStatus(t *testing.T) {
	s := newTestServer(t, nil)
	code := mustCreate(t, s, `{"url":"https://example.com/"}`)
	visits := []struct{ method, path string }{
		{"GET", "/" + code}, {"GET", "/zzzzzzz"}, {"HEAD", "/" + code},
		{"GET", "/zzzzzzz"}, {"GET", "/" + code}, {"GET", "/" + code},
	}
	for _, v := range visits {
		do(s, v.method, v.path, "", "")
	}
	families, err := s.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted, timed := map[string]float64{}, uint64(0)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] != "redirect" {
				continue
			}
			switch f.GetName() {
			case "linkraft_http_requests_total":
				counted[labels["code"]] += m.GetCounter().GetValue()
			case "linkraft_http_request_duration_seconds":
				timed += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if counted["302"] != 4 || counted["404"] != 2 || len(counted) != 2 {
		t.Errorf("redirect answers counted by status %v, want 302: 4, 404: 2", counted)
	}
	if timed != uint64(len(visits)) {
		t.Errorf("%d redirect answers timed, want %d", timed, len(visits))
	}
}

// TestBuildInfo: every node says which build it runs, so that the mixed
// versions of a rolling upgrade show in one query of /metrics.
func TestBuildInfo(t *testing.T) {
	s := newTestServer(t, nil)
	families, err := s.metrics.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "linkraft_build_info" {
			continue
		}
		labels := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["version"] != "test" || labels["goversion"] != runtime.Version() || labels["revision"] == "" || f.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Errorf("linkraft_build_info %v = %v, want version test, goversion %s, a revision, value 1", labels, f.GetMetric()[0].GetGauge().GetValue(), runtime.Version())
		}
		return
	}
	t.Error("no linkraft_build_info in the node's metrics")
}
