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
