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

// routable returns the current workers without those marked down (all of them when every one
// is down), in both shapes; the current set itself, without a copy, when none is down.
func (a *App) routable() *workerSet { return a.health.Load().routableSet(a.workers.Load()) }

// routableSet returns s without the workers marked down; s itself when none is down, or when all
// are (the proxy then tries them rather than answering 503 without an attempt).
func (h *workerHealth) routableSet(s *workerSet) *workerSet {
	up := h.upIndexes(s.all)
	if up == nil {
		return s
	}
	out := &workerSet{all: make([]registry.Worker, len(up)), routed: make([]router.Worker, len(up))}
	for j, i := range up {
		out.all[j], out.routed[j] = s.all[i], s.routed[i]
	}
	return out
}

// routable returns ws without the workers marked down; all of ws when every one is down.
func (h *workerHealth) routable(ws []registry.Worker) []registry.Worker {
	up := h.upIndexes(ws)
	if up == nil {
		return ws
	}
	out := make([]registry.Worker, len(up))
	for j, i := range up {
		out[j] = ws[i]
	}
	return out
}

// upIndexes returns the indexes of the workers of ws not marked down, or nil when that is all of
// them or none.
func (h *workerHealth) upIndexes(ws []registry.Worker) []int {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.down) == 0 {
		return nil
	}
	up := make([]int, 0, len(ws))
	for i, w := range ws {
		if _, d := h.down[w.WorkerID]; !d {
			up = append(up, i)
		}
	}
	if len(up) == 0 || len(up) == len(ws) {
		return nil
	}
	return up
}
