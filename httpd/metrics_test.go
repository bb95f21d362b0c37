package httpd

import (
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
