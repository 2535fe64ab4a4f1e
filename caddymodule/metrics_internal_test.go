package caddymodule

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsRegisterPerConfig registers the collectors with a registry twice (as two handlers of
// one config do) and with a second registry (a reload): no error, and the same collectors.
func TestMetricsRegisterPerConfig(t *testing.T) {
	r1 := prometheus.NewRegistry()
	m1, err := registerMetrics(r1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registerMetrics(r1); err != nil {
		t.Fatalf("second registration: %v", err)
	}
	m1.decisions.WithLabelValues("m", "w1", "").Inc()
	r2 := prometheus.NewRegistry()
	m2, err := registerMetrics(r2)
	if err != nil || m2 != m1 {
		t.Fatalf("reload registration: %v (same collectors: %v)", err, m2 == m1)
	}
	families, err := r2.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	// vectors without samples are not gathered; the counter incremented above is, on the new registry
	if !names["caddy_kvroute_decisions_total"] || !names["caddy_kvroute_predicted_hit_ratio"] {
		t.Errorf("gathered %v", names)
	}
	descs := make(chan *prometheus.Desc, 32)
	for _, c := range m1.collectors() {
		c.Describe(descs)
	}
	close(descs)
	var all []string
	for d := range descs {
		all = append(all, d.String())
	}
	for _, want := range []string{"caddy_kvroute_decisions_total", "caddy_kvroute_errors_total", "caddy_kvroute_predicted_hit_ratio",
		"caddy_kvroute_routing_seconds", "caddy_kvroute_decode_cache_total", "caddy_kvroute_events_total", "caddy_kvroute_index_blocks",
		"caddy_kvroute_contract_agreement", "caddy_kvroute_layout_verified_total"} {
		found := false
		for _, d := range all {
			if strings.Contains(d, `"`+want+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("metric %s missing", want)
		}
	}
}
