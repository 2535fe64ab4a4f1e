package caddymodule

import (
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Memory that comes back (issue 27). Two mechanisms, both measured by TestRSSAfterBurst:
//
//   - A soft memory limit (debug.SetMemoryLimit, the GOMEMLIMIT mechanism) derived from the
//     configured budgets: the Go heap the process needs at rest plus the media budget plus the two
//     caches plus headroom. Near it the garbage collector runs sooner instead of letting the heap
//     double (GOGC=100), which bounds the peak of a burst of large media. An operator's GOMEMLIMIT
//     wins; `memory_limit` sets the limit, `memory_limit off` sets none.
//   - Freeing after a burst: once the process is quiet (allocating less than 1 MiB per 250 ms for a
//     second) while the Go memory beyond the live heap is at least burstBytes, the heap is
//     collected and its free pages returned to the OS (debug.FreeOSMemory), instead of waiting for
//     the background scavenger, which returns them over minutes (freer). Whatever made the burst
//     (media, large bodies) is covered.

// memHeadroom is added to the soft limit for what the budgets do not count: request bodies and
// their parsed forms, the event path's buffers, Caddy's own.
const memHeadroom = 512 << 20

// burstBytes is the Go memory beyond the live heap above which a quiet moment frees memory;
// burstQuiet how long the process must be quiet first; burstPoll how often it is read.
const (
	burstBytes = 64 << 20
	burstQuiet = time.Second
	burstPoll  = 250 * time.Millisecond
)

// memLimitMu guards the process-wide soft limit set by kvroute (memLimitSet).
var (
	memLimitMu  sync.Mutex
	memLimitSet int64 // the limit kvroute set, 0 when none
)

// softMemoryLimit returns the soft limit for a config: base (the Go memory the process holds at
// start: runtime, Caddy, the model's tokenizer and template) + the media budget + the tokenize and
// template cache budgets (the template cache's twice: the agent-API conversion cache has the
// same budget, routing/router apis.go) + memHeadroom, in bytes.
func softMemoryLimit(base, mediaBudget, tokenizeCache, templateCache int64) int64 {
	return base + mediaBudget + max(tokenizeCache, 0) + 2*max(templateCache, 0) + memHeadroom
}

// goMemoryBytes is the Go runtime's mapped memory now (runtime/metrics
// /memory/classes/total:bytes, what GOMEMLIMIT counts).
func goMemoryBytes() int64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// applyMemoryLimit sets the process's soft memory limit for the config that starts (the newest
// config's budgets decide), unless the operator set GOMEMLIMIT or the config says `off`.
func (a *App) applyMemoryLimit() {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		a.logger.Info("soft memory limit from GOMEMLIMIT", zap.Int64("bytes", debug.SetMemoryLimit(-1)))
		return
	}
	memLimitMu.Lock()
	defer memLimitMu.Unlock()
	limit := int64(0)
	switch {
	case a.MemoryLimit != nil && *a.MemoryLimit < 0: // off
	case a.MemoryLimit != nil && *a.MemoryLimit > 0:
		limit = *a.MemoryLimit
	default:
		base := goMemoryBytes()
		if memLimitSet > 0 {
			base = min(base, memLimitSet) // a reload: the last config's limit is not this config's base
		}
		limit = softMemoryLimit(base, a.RoutingConfig.Media.budgetSize(), a.tokenizeCacheSize(), a.templateCacheSize())
	}
	if limit == 0 {
		if memLimitSet > 0 {
			debug.SetMemoryLimit(1<<63 - 1) // the runtime's default: no limit
			memLimitSet = 0
		}
		a.logger.Info("no soft memory limit (memory_limit off)")
		return
	}
	debug.SetMemoryLimit(limit)
	memLimitSet = limit
	a.logger.Info("soft memory limit set", zap.Int64("bytes", limit), zap.Int64("media_budget", a.RoutingConfig.Media.budgetSize()),
		zap.Int64("tokenize_cache", a.tokenizeCacheSize()), zap.Int64("template_cache", a.templateCacheSize()))
}

// readMem reads runtime/metrics: cumulative heap allocations, live heap after the last GC,
// total mapped Go memory and the part of it already returned to the OS.
func readMem() (allocs, live, total, released int64) {
	s := []rtmetrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != rtmetrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	return v(0), v(1), v(2), v(3)
}

// freer returns the heap a burst left behind to the OS once the process is quiet: when the Go
// memory held beyond the live heap (garbage and free pages not yet returned) is at least
// burstBytes and less than burstQuietAllocs were allocated during the last burstQuiet, it calls
// debug.FreeOSMemory (a full collection, then every free page returned). Under load allocations
// never stop for a second, so it does not add collections to busy periods; after a burst it runs
// once. One per process while any config runs (startFreer, refcounted).
func freer(stop <-chan struct{}, logger *zap.Logger) {
	t := time.NewTicker(burstPoll)
	defer t.Stop()
	lastAllocs, _, _, _ := readMem()
	var quietSince time.Time
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		allocs, live, total, released := readMem()
		busy := allocs-lastAllocs >= burstQuietAllocs
		lastAllocs = allocs
		if busy || total-released-live < burstBytes {
			quietSince = time.Time{}
			continue
		}
		if quietSince.IsZero() {
			quietSince = time.Now()
			continue
		}
		if time.Since(quietSince) < burstQuiet {
			continue
		}
		debug.FreeOSMemory()
		frees.Add(1)
		_, live2, total2, released2 := readMem()
		logger.Debug("returned memory to the OS after a burst", zap.Int64("held_before", total-released),
			zap.Int64("held_after", total2-released2), zap.Int64("live_heap", live2))
		lastAllocs, _, _, _ = readMem()
		quietSince = time.Time{}
	}
}

// burstQuietAllocs is the allocation per burstPoll under which the process counts as quiet.
const burstQuietAllocs = 1 << 20

var (
	freerMu   sync.Mutex
	freerRefs int
	freerStop chan struct{}
	frees     atomic.Int64 // FreeOSMemory calls by the freer
)

// startFreer starts the process's freer for one more running config; the returned function
// releases it (the last release stops it).
func startFreer(logger *zap.Logger) func() {
	freerMu.Lock()
	defer freerMu.Unlock()
	if freerRefs == 0 {
		freerStop = make(chan struct{})
		go freer(freerStop, logger)
	}
	freerRefs++
	var once sync.Once
	return func() {
		once.Do(func() {
			freerMu.Lock()
			defer freerMu.Unlock()
			if freerRefs--; freerRefs == 0 {
				close(freerStop)
			}
		})
	}
}
