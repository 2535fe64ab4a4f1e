package caddymodule

import (
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/routing/router"
)

// workerSet is one worker list in the two shapes the request path reads: the registry records
// (selection policy, upstreams, admin API) and the router's view of them, converted once when the
// list changes (App.refreshWorkers) rather than on every request. Replaced, never mutated.
type workerSet struct {
	all    []registry.Worker // sorted by worker id
	routed []router.Worker   // routed[i] is all[i] as the router sees it
}

func newWorkerSet(ws []registry.Worker) *workerSet {
	return &workerSet{all: ws, routed: routerWorkers(ws)}
}

// decisionWorkers returns what the router decides over: every worker (static and live), so that a model
// whose workers are all marked down is still that model's and its requests are not scored on
// another model's workers (a fresh operator test saw them sent to one), and whether a worker may
// be chosen (not marked down: such a worker is scored, ranked last and not chosen).
func (a *App) decisionWorkers() (*workerSet, func(*router.Worker) bool) {
	h := a.health.Load()
	return a.workers.Load(), func(w *router.Worker) bool { return !h.isDown(w.ID) }
}
