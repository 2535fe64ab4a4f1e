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
	// indexSeries and agreementSeries keep the label sets of indexBlocks and contractAgreement
	// to the live workers and models (gaugeseries.go).
	indexSeries, agreementSeries *gaugeSeries
	layoutVerified               *prometheus.CounterVec
	// readings reports the running app's per-worker and router readings (readings_metrics.go).
	readings *readingsCollector
	// tokenizeCaches and messageCaches count the pooled caches (shared.go).
	tokenizeCaches, messageCaches *cacheCounts
}

// hitRatioBuckets are the upper bounds of caddy_kvroute_predicted_hit_ratio: exact decimals from
// 0 to 1, so a full hit (ratio exactly 1) is counted in le="1".
var hitRatioBuckets = []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1}

// kvMetrics is created once per process and registered with every config's registry: Caddy gives
// each config load a fresh registry, and re-creating collectors would reset the counters on every
// reload (or panic on a duplicate registration).
var kvMetrics = newMetrics()

// metricsNamespace and metricsSubsystem prefix every kvroute metric: caddy_kvroute_<name>.
const metricsNamespace, metricsSubsystem = "caddy", "kvroute"

func newMetrics() *metrics {
	m := &metrics{
		readings:       newReadingsCollector(metricsNamespace, metricsSubsystem),
		tokenizeCaches: newCacheCounts(),
		messageCaches:  newCacheCounts(),
		decisions: counterVec("decisions_total",
			"Routing decisions by model (a model some worker declares, else other), worker the request went to and fallback reason (empty when exact, not_routed when not routed by KV overlap).",
			"model", "worker", "fallback"),
		errors: counterVec("errors_total", "Requests answered with a kvroute client error, by reason code.", "code"),
		hitRatio: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "predicted_hit_ratio",
			Help: "Overlap blocks of the chosen worker divided by the request's total blocks.",
			// Written out: LinearBuckets(0, 0.1, 11) accumulates float steps (0.30000000000000004,
			// top bucket 0.9999999999999999), and a full hit (exactly 1) then lands only in +Inf.
			Buckets: hitRatioBuckets,
		}),
		routingSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: "routing_seconds",
			Help:    "Time spent per routing stage (parse, template, tokenize, fetch, decode, layout, hash, index, score).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"stage"}),
		decodeCache:       counterVec("decode_cache_total", "Decode cache lookups (videos and images) by result.", "result"),
		events:            counterVec("events_total", "KV events received by worker and result.", "worker", "result"),
		indexBlocks:       gaugeVec("index_blocks", "Blocks held in the KV index per worker.", "worker"),
		contractAgreement: gaugeVec("contract_agreement", "1 when every worker of the model publishes agreeing video contracts, else 0.", "model"),
		layoutVerified:    counterVec("layout_verified_total", "Run-time layout verifications against worker events, by result.", "result"),
	}
	m.indexSeries = &gaugeSeries{vec: m.indexBlocks}
	m.agreementSeries = &gaugeSeries{vec: m.contractAgreement}
	return m
}

// counterVec is the caddy_kvroute_<name> counter with labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
	}, labels)
}

// gaugeVec is the caddy_kvroute_<name> gauge with labels.
func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Subsystem: metricsSubsystem, Name: name, Help: help,
	}, labels)
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.decisions, m.errors, m.hitRatio, m.routingSeconds, m.decodeCache,
		m.events, m.indexBlocks, m.contractAgreement, m.layoutVerified, m.readings, tokenizeCacheCollector{m.tokenizeCaches}, templateCacheCollector{m.messageCaches}}
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
