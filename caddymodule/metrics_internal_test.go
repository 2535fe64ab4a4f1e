package caddymodule

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvroute/kvroute/kvevents/registry"
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

// TestHitRatioBucketsExact: the buckets are the decimals 0, 0.1, …, 1 exactly, and a full hit
// (ratio 1) is counted in le="1", not only in +Inf (issue 15).
func TestHitRatioBucketsExact(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "t", Buckets: hitRatioBuckets})
	h.Observe(1)
	h.Observe(0.3)
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	var bounds []string
	counts := map[string]uint64{}
	for _, b := range m.GetHistogram().GetBucket() {
		k := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
		bounds = append(bounds, k)
		counts[k] = b.GetCumulativeCount()
	}
	if got := strings.Join(bounds, " "); got != "0 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1" {
		t.Fatalf("bucket bounds %s", got)
	}
	if counts["1"] != 2 || counts["0.9"] != 1 || counts["0.3"] != 1 || counts["0.2"] != 0 {
		t.Fatalf("cumulative counts %v: want le=1 2, le=0.9 1, le=0.3 1, le=0.2 0", counts)
	}
	if kvMetrics.hitRatio.Desc().String() == "" {
		t.Fatal("no hit ratio collector")
	}
}

// TestModelLabelBounded: a model a worker declares is its own label, any other client value is
// "other", an absent model stays "".
func TestModelLabelBounded(t *testing.T) {
	ws := []registry.Worker{{WorkerID: "w1", Model: "qwen"}, {WorkerID: "w2", Model: "llama"}}
	for in, want := range map[string]string{"qwen": "qwen", "llama": "llama", "": "", "qwen ": "other", "x9f3": "other"} {
		if got := modelLabel(in, ws); got != want {
			t.Errorf("modelLabel(%q) = %q, want %q", in, got, want)
		}
	}
}
