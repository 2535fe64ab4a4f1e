package scheduler

import (
	"math"
	"sync"

	"github.com/kvroute/kvroute/routing/index"
)

// Defaults of the ttft model's load bound.
const (
	// DefaultBalanceFactor is the default BalanceFactor: a worker may take up to 1.1× its fair
	// share of the recent requests (HAProxy's hash-balance-factor 110). bench/quality: 1.25 let
	// the requests per worker drift to 1.35 max/min on the repeated-video workload, 1.1 kept it at
	// 1.07 with the same hit rate within 1 %.
	DefaultBalanceFactor = 1.1
	// DefaultBalanceWindow is the default BalanceWindow, in routed requests per available worker.
	DefaultBalanceWindow = 25
	// pruneBelow drops a worker's recent count once it decayed below this (a worker that left).
	pruneBelow = 1e-3
)

// recentLoad counts the requests this scheduler routed to each worker, decayed by
// (1 − 1/(window · workers)) per routed request, so the counts cover about the last window requests
// per worker. It feeds the load bound
// of consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, SODA 2018): a worker
// may take a request while its count + 1 ≤ ceil(factor · (total + 1) / available workers).
type recentLoad struct {
	mu     sync.Mutex
	window float64
	counts map[index.WorkerKey]float64
}

func newRecentLoad(window int) *recentLoad {
	return &recentLoad{window: float64(window), counts: map[index.WorkerKey]float64{}}
}

// add records one request routed to w among `workers` available workers.
func (r *recentLoad) add(w index.WorkerKey, workers int) {
	decay := 1 - 1/(r.window*float64(max(workers, 1)))
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.counts {
		if c *= decay; c < pruneBelow {
			delete(r.counts, k)
		} else {
			r.counts[k] = c
		}
	}
	r.counts[w]++
}

// snapshot returns the counts of ws.
func (r *recentLoad) snapshot(ws []Candidate) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]float64, len(ws))
	for i, c := range ws {
		out[i] = r.counts[c.Worker]
	}
	return out
}

// balanceBound is ceil(factor · (total + 1) / n): the most recent requests one of n workers may
// hold, this one included.
func balanceBound(factor, total float64, n int) float64 {
	return math.Ceil(factor * (total + 1) / float64(n))
}

func (c *Config) balanceFactor() float64 {
	switch {
	case c.BalanceFactor == 0:
		return DefaultBalanceFactor
	case c.BalanceFactor < 0:
		return 0
	}
	return c.BalanceFactor
}

func (c *Config) balanceWindow() int {
	if c.BalanceWindow == 0 {
		return DefaultBalanceWindow
	}
	return c.BalanceWindow
}
