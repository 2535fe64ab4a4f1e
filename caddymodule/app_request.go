package caddymodule

import (
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/routing/router"
)

// Request-time methods of the `kvroute` app: what the handler, the selection policy, the
// upstream source, the admin API and tests read of the running config. Lock-free on the request
// path except runningNATS and the cores (App.mu, a leaf).

// WorkerList returns the current workers (static and live), sorted by worker id. The slice is shared:
// do not modify it. Safe for concurrent use; lock-free.
func (a *App) WorkerList() []registry.Worker { return a.workers.Load().all }

// WorkerByEndpoint returns the worker whose normalized endpoint is ep.
func (a *App) WorkerByEndpoint(ep string) (registry.Worker, bool) {
	for _, w := range a.WorkerList() {
		if w.Endpoint == ep {
			return w, true
		}
	}
	return registry.Worker{}, false
}

// decisionWorkers returns what the router decides over: every worker (static and live), so that a model
// whose workers are all marked down is still that model's and its requests are not scored on
// another model's workers (a fresh operator test saw them sent to one), and whether a worker may
// be chosen (not marked down: such a worker is scored, ranked last and not chosen).
func (a *App) decisionWorkers() (*workerSet, func(*router.Worker) bool) {
	h := a.health.Load()
	return a.workers.Load(), func(w *router.Worker) bool { return !h.isDown(w.ID) }
}

// Decider returns the routing decider in use.
func (a *App) Decider() Decider {
	if b := a.decider.Load(); b != nil {
		return b.d
	}
	return NoPreference{}
}

// SetDecider replaces the routing decider (the index and scheduler install theirs; tests inject
// one). Safe for concurrent use.
func (a *App) SetDecider(d Decider) { a.decider.Store(&deciderBox{d}) }

// NATS returns the app's NATS connection state, or nil before Start and after Stop.
func (a *App) NATS() *SharedNATS {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nats == nil {
		return nil
	}
	return &SharedNATS{s: a.nats}
}

// runningNATS returns the app's shared NATS, nil before Start and after Stop.
func (a *App) runningNATS() *sharedNATS {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nats
}

// eventCore returns the running index and subscriber, nil before Start.
// KVIndex returns the index the app's KV event subscriber applies to (nil before Start), so tests
// and tools can compare replicas block for block (index.Index.Dump).
func (a *App) KVIndex() *index.Index {
	if ec := a.eventCore(); ec != nil {
		return ec.index
	}
	return nil
}

func (a *App) eventCore() *eventCore {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.events
}

// routingCore returns this config's router, nil without model_dir or before Start.
func (a *App) routingCore() *routingCore {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.routing
}

// MediaInflightBytes is the number of bytes reserved now in the process-wide media budget this
// app's config uses (`media { max_inflight_bytes }`): fetch buffers and media held for decoding.
func (a *App) MediaInflightBytes() int64 {
	if a.shared.mediaBudget == nil {
		return 0 // not provisioned
	}
	return a.shared.mediaBudget.Held()
}
