package caddymodule

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// gaugeSeries is a one-label gauge whose label set is the live set of something (the workers of
// the index, the models of the worker list): set replaces the whole set, deleting the series of
// names no longer in it. It is process-wide, like the collectors, so a reload that drops a
// model or a worker drops its series too: a series left at 0 for a model nobody serves kept an
// alert (KvrouteContractDisagreement) pending forever (found by the test suite, where one
// process runs many configs).
type gaugeSeries struct {
	vec *prometheus.GaugeVec

	mu    sync.Mutex
	names map[string]bool
}

// set makes the gauge's series exactly vals.
func (g *gaugeSeries) set(vals map[string]float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, v := range vals {
		g.vec.WithLabelValues(name).Set(v)
	}
	for name := range g.names {
		if _, ok := vals[name]; !ok {
			g.vec.DeleteLabelValues(name)
		}
	}
	g.names = make(map[string]bool, len(vals))
	for name := range vals {
		g.names[name] = true
	}
}
