package caddymodule

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics holds kvroute's collectors (DESIGN.md §10).
type metrics struct {
	decisions         *prometheus.CounterVec
	errors            *prometheus.CounterVec
	hitRatio          prometheus.Histogram
	routingSeconds    *prometheus.HistogramVec
	decodeCache       *prometheus.CounterVec
	events            *prometheus.CounterVec
	indexBlocks       *prometheus.GaugeVec
	contractAgreement *prometheus.GaugeVec
	layoutVerified    *prometheus.CounterVec
	// state reports the running app's per-worker and router operating state (state_metrics.go).
	state *stateCollector
}

// hitRatioBuckets are the upper bounds of caddy_kvroute_predicted_hit_ratio: exact decimals from
// 0 to 1, so a full hit (ratio exactly 1) is counted in le="1".
var hitRatioBuckets = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// kvMetrics is created once per process and registered with every config's registry: Caddy gives
// each config load a fresh registry, and re-creating collectors would reset the counters on every
// reload (or panic on a duplicate registration).
var kvMetrics = newMetrics()

func newMetrics() *metrics {
	const ns, sub = "caddy", "kvroute"
	return &metrics{
		state: newStateCollector(ns, sub),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "decisions_total",
			Help: "Routing decisions by model (a model some worker declares, else other), worker the request went to and fallback reason (empty when exact, not_routed when not routed by KV overlap).",
		}, []string{"model", "worker", "fallback"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "errors_total",
			Help: "Requests answered with a kvroute client error, by reason code.",
		}, []string{"code"}),
		hitRatio: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "predicted_hit_ratio",
			Help: "Overlap blocks of the chosen worker divided by the request's total blocks.",
			// Written out: LinearBuckets(0, 0.1, 11) accumulates float steps (0.30000000000000004,
			// top bucket 0.9999999999999999), and a full hit (exactly 1) then lands only in +Inf.
			Buckets: hitRatioBuckets,
		}),
		routingSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "routing_seconds",
			Help:    "Time spent per routing stage (parse, template, tokenize, fetch, decode, layout, hash, index, score).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"stage"}),
		decodeCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "decode_cache_total",
			Help: "Video decode cache lookups by result.",
		}, []string{"result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "events_total",
			Help: "KV events received by worker and result.",
		}, []string{"worker", "result"}),
		indexBlocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "index_blocks",
			Help: "Blocks held in the KV index per worker.",
		}, []string{"worker"}),
		contractAgreement: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "contract_agreement",
			Help: "1 when every worker of the model publishes agreeing video contracts, else 0.",
		}, []string{"model"}),
		layoutVerified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "layout_verified_total",
			Help: "Run-time layout verifications against worker events, by result.",
		}, []string{"result"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.errors, m.hitRatio, m.routingSeconds, m.decodeCache,
		m.events, m.indexBlocks, m.contractAgreement, m.layoutVerified, m.state, tokenizeCacheCollector{}}
}

// registerMetrics registers the process-wide collectors with reg (one config's registry; nil is
// allowed and registers nothing). An AlreadyRegisteredError means the collector is already there
// and is not an error.
func registerMetrics(reg *prometheus.Registry) (*metrics, error) {
	if reg == nil {
		return kvMetrics, nil
	}
	for _, c := range kvMetrics.collectors() {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			return nil, fmt.Errorf("registering collector: %w", err)
		}
	}
	return kvMetrics, nil
}
