package caddymodule

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// readingsCollector exposes the readings of the running config's app (readings.go) at scrape
// time: caddy_kvroute_worker_* per listed worker (series of a worker that left disappear with it)
// and the router-level gauges. Like every kvroute collector it is created once per process and
// registered with each config's registry; the app that started last is the one reported.
type readingsCollector struct {
	app atomic.Pointer[App]

	prefill, decode, inFlight, healthy, eventAge   *prometheus.Desc
	natsConnected, natsReconnects, registryWorkers *prometheus.Desc
	staticWorkers, slotsBusy, slots, mediaInflight *prometheus.Desc
	registryDegraded                               *prometheus.Desc
}

func newReadingsCollector(ns, sub string) *readingsCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, sub, name), help, labels, nil)
	}
	return &readingsCollector{
		prefill:  desc("worker_active_prefill_tokens", "Uncached prompt tokens of the worker's requests that have no first response byte yet (this router's accounting plus replicas').", "worker"),
		decode:   desc("worker_active_decode_blocks", "Prompt blocks of the worker's requests that have not finished (this router's accounting plus replicas').", "worker"),
		inFlight: desc("worker_requests_in_flight", "Requests routed to the worker that have not finished (this router's accounting plus replicas').", "worker"),
		healthy:  desc("worker_healthy", "1 while this replica routes to the worker, 0 while it is marked down (passive failure or failed health probe); a worker that leaves loses its series.", "worker"),
		eventAge: desc("worker_last_event_age_seconds", "Seconds since the worker's last KV event message arrived (absent before the first).", "worker"),

		natsConnected:   desc("nats_connected", "1 while the router's NATS connection is up, else 0."),
		natsReconnects:  desc("nats_reconnects_total", "Reconnections of the router's NATS connection since it was opened."),
		registryWorkers: desc("registry_workers", "Live worker records in the kvroute_workers bucket."),
		staticWorkers:   desc("static_workers", "Workers declared in the configuration."),
		registryDegraded: desc("registry_degraded", "1 while the kvroute_workers bucket cannot be read (or was not opened yet): the router keeps "+
			"the last known worker records and drops a worker only on evidence; else 0."),
		slotsBusy:     desc("decode_slots_busy", "Video decode slots in use."),
		slots:         desc("decode_slots", "Video decode slots configured (decode_slots)."),
		mediaInflight: desc("media_inflight_bytes", "Media bytes held by requests in flight (with a media in-flight budget)."),
	}
}

// setApp makes a the reported app (App.Start).
func (c *readingsCollector) setApp(a *App) { c.app.Store(a) }

// clearApp stops reporting a unless another app has started since (App.Stop; during a reload the
// new config starts before the old one stops).
func (c *readingsCollector) clearApp(a *App) { c.app.CompareAndSwap(a, nil) }

// Describe implements prometheus.Collector.
func (c *readingsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.prefill, c.decode, c.inFlight, c.healthy, c.eventAge, c.natsConnected,
		c.natsReconnects, c.registryWorkers, c.staticWorkers, c.slotsBusy, c.slots, c.mediaInflight, c.registryDegraded} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *readingsCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.app.Load()
	if a == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, w := range a.workerReadings() {
		gauge(c.prefill, float64(w.ActivePrefillTokens), w.WorkerID)
		gauge(c.decode, float64(w.ActiveDecodeBlocks), w.WorkerID)
		gauge(c.inFlight, float64(w.RequestsInFlight), w.WorkerID)
		gauge(c.healthy, boolFloat(w.Healthy), w.WorkerID)
		if w.LastEventAge >= 0 {
			gauge(c.eventAge, w.LastEventAge.Seconds(), w.WorkerID)
		}
	}
	r := a.routerReading()
	gauge(c.natsConnected, boolFloat(r.NATSConnected))
	ch <- prometheus.MustNewConstMetric(c.natsReconnects, prometheus.CounterValue, float64(r.NATSReconnects))
	gauge(c.registryWorkers, float64(r.RegistryWorkers))
	gauge(c.staticWorkers, float64(r.StaticWorkers))
	gauge(c.registryDegraded, boolFloat(r.RegistryDegraded))
	gauge(c.slotsBusy, float64(r.DecodeSlotsBusy))
	gauge(c.slots, float64(r.DecodeSlots))
	if r.HasMediaInflight {
		gauge(c.mediaInflight, float64(r.MediaInflightBytes))
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
