package caddymodule

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// workerHealthy is `caddy_kvroute_worker_healthy{worker}`: 1 while this replica routes to the
// worker, 0 while it is marked down (passive failure or failed health probe). Process-wide like
// kvMetrics, so reloads keep the series.
var workerHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "caddy", Subsystem: "kvroute", Name: "worker_healthy",
	Help: "1 while this replica routes to the worker, 0 while it is marked down.",
}, []string{"worker"})

// registerHealthMetrics registers workerHealthy with reg (nil registers nothing).
func registerHealthMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	if err := reg.Register(workerHealthy); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return fmt.Errorf("registering worker_healthy: %w", err)
		}
	}
	return nil
}

// setWorkerHealthy sets the gauge of worker id.
func setWorkerHealthy(id string, healthy bool) {
	v := 0.0
	if healthy {
		v = 1
	}
	workerHealthy.WithLabelValues(id).Set(v)
}

// setHealthGauges sets the gauge of every listed worker and deletes the series of workers no
// longer listed, so the label set follows the registry.
func (a *App) setHealthGauges(ws []registry.Worker) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := make(map[string]bool, len(ws))
	for _, w := range ws {
		now[w.WorkerID] = true
		setWorkerHealthy(w.WorkerID, !a.health.isDown(w.WorkerID))
	}
	for id := range a.gauged {
		if !now[id] {
			workerHealthy.DeleteLabelValues(id)
		}
	}
	a.gauged = now
}
