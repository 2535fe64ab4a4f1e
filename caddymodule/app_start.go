package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/loadsync"
	"github.com/kvroute/kvroute/routing/mediaresolver"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// Start of the `kvroute` app: the shared NATS from natsPool, the event core, this config's
// routing core, the worker list, the health prober, the memory limit.

// Start connects to NATS (starting the embedded server if needed) through the usage pool, so a
// reload with the same NATS settings reuses the running connection, and starts following the
// worker registry.
func (a *App) Start() error {
	defer a.markStarted() // also on failure: waiting handlers then proceed (their config is rejected)
	val, _, err := natsPool.LoadOrNew(a.poolKey, func() (caddy.Destructor, error) {
		return newSharedNATS(a.natsConfig(), caddy.Log().Named("kvroute.nats"), a.recordAllowed)
	})
	if err != nil {
		return fmt.Errorf("starting kvroute NATS: %w", err)
	}
	st := val.(*sharedNATS)
	st.setAccept(a.recordAllowed) // a reused connection follows this config's upstream_cidrs
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	a.mu.Lock()
	a.nats, a.stop, a.done = st, cancel, done
	a.mu.Unlock()
	a.health.Store(st.health)
	st.attachResponses(a.responses, a.APIs.ttl())
	if err := a.startRouting(st); err != nil {
		cancel()
		close(done)
		_ = a.Stop()
		return fmt.Errorf("starting kvroute routing: %w", err)
	}
	a.refreshWorkers()
	a.applyMemoryLimit()
	release := startFreer(caddy.Log().Named("kvroute.memory"))
	go func() { <-ctx.Done(); release() }()
	p := &prober{cfg: *a.HealthChecks, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		health: st.health, workers: a.WorkerList, lastSeen: st.watcher.LastSeen}
	go p.run(ctx)
	changes, unsub := st.watcher.Subscribe()
	ready := st.watcher.Ready() // the first read of this registry replaces any last-known records
	go func() {
		defer close(done)
		defer unsub()
		defer func() {
			if r := recover(); r != nil {
				a.logger.Error("worker list refresher panicked", zap.Any("panic", r), zap.Stack("stack"))
			}
		}()
		gauges := time.NewTicker(5 * time.Second)
		defer gauges.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
				a.refreshWorkers()
			case <-ready:
				ready = nil
				a.refreshWorkers()
			case <-gauges.C:
				a.updateIndexGauges()
			}
		}
	}()
	a.metrics.readings.setApp(a)
	a.logger.Info("kvroute app started", zap.String("nats", st.url), zap.Bool("embedded", st.embedded != nil), zap.Int("static_workers", len(a.static)))
	return nil
}

// startRouting loads the model, gets the shared event core and installs the routing decider.
// Without model_dir the index still follows the workers' events, and requests route on load alone.
func (a *App) startRouting(st *sharedNATS) error {
	m, err := a.loadModel()
	if err != nil {
		return err
	}
	var mm *model.Model
	if m != nil {
		mm = m.model
	}
	ec, err := st.core(a.Index.indexConfig(), mm, caddy.Log().Named("kvroute.events"))
	if err != nil {
		return err
	}
	settings := &coreSettings{index: a.Index.indexConfig(), model: mm}
	var rcore *routingCore
	if m != nil {
		if rcore, err = a.newRoutingCore(m, ec); err != nil {
			return err
		}
		settings.verify = rcore.router.VerifyStored
	}
	// without model_dir, settings.verify is nil: a previous config's router stops verifying
	if err := st.activate(a, settings); err != nil {
		rcore.close()
		return err
	}
	if rcore != nil {
		a.SetDecider(&routerDecider{app: a, core: rcore})
	} else {
		a.logger.Warn("no model_dir configured: requests are routed on load alone")
	}
	a.mu.Lock()
	a.events, a.routing = ec, rcore
	a.mu.Unlock()
	return nil
}

// newRoutingCore builds the router for model m over the shared index and load tracker.
func (a *App) newRoutingCore(loaded *loadedModel, ec *eventCore) (*routingCore, error) {
	rc := &a.RoutingConfig
	m, lm := loaded.model, loaded.layout
	a.setCaches(m) // before the router shares the tokenizer and the template
	sched, err := scheduler.NewWithTracker(rc.Scheduler, nil, ec.tracker)
	if err != nil {
		return nil, fmt.Errorf("creating scheduler: %w", err)
	}
	fc := rc.Media.fetchConfig()
	fc.Budget = a.shared.mediaBudget
	f, err := fetch.New(fc)
	if err != nil {
		return nil, fmt.Errorf("creating media fetcher: %w", err)
	}
	dec, err := media.NewDecoder(rc.Media.decoderConfig())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("creating video decoder: %w", err)
	}
	res := mediaresolver.New(f, dec)
	if res.ImageIdentity, err = rc.Media.imageIdentity(); err != nil {
		f.Close()
		return nil, fmt.Errorf("media: %w", err)
	}
	res.Codecs = rc.Media.CodecList()
	stage := func(s string, d time.Duration) { a.metrics.routingSeconds.WithLabelValues(s).Observe(d.Seconds()) }
	res.Stage = stage
	res.CacheResult = func(result string) { a.metrics.decodeCache.WithLabelValues(result).Inc() }
	res.Revalidated = func() { a.metrics.decodeCache.WithLabelValues("revalidated").Inc() }
	cfg := router.DefaultConfig()
	if rc.FrontendDecoding != nil {
		cfg.FrontendDecoding = *rc.FrontendDecoding
	}
	defaults.Override(&cfg.MaxMedia, rc.MaxMedia)
	defaults.Override(&cfg.MaxMessages, rc.MaxMessages)
	defaults.Override(&cfg.MaxParts, rc.MaxParts)
	cfg.APIs = rc.APIs.options()
	hooks := router.Hooks{
		Stage:    stage,
		Verified: func(result string) { a.metrics.layoutVerified.WithLabelValues(result).Inc() },
	}
	r, err := router.New(cfg, m, lm, ec.index, sched, res, hooks, a.logger.Named("router"))
	if err != nil {
		f.Close()
		return nil, err
	}
	core := &routingCore{router: r, fetcher: f, decoder: dec, budget: a.shared.mediaBudget}
	if st := a.NATS(); st != nil {
		ls, err := loadsync.New(loadsync.Config{Replica: replicaID, Logger: a.logger.Named("loadsync")}, st.Conn(), sched.Tracker(), a.workerIDs)
		if err == nil {
			err = ls.Start()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("starting replica load sync: %w", err)
		}
		core.sync = ls
	}
	return core, nil
}

// workerIDs lists the current workers' ids.
func (a *App) workerIDs() []string {
	ws := a.WorkerList()
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.WorkerID
	}
	return ids
}

func (a *App) refreshWorkers() {
	a.mu.Lock()
	st := a.nats
	a.mu.Unlock()
	var live []registry.Worker
	if st != nil {
		live = a.filterLive(a.registryRecords(st))
	}
	merged := registry.Merge(a.static, live)
	set := newWorkerSet(merged)
	a.workers.Store(set)
	if st != nil {
		if owner := st.newest(); owner == a || owner == nil {
			st.health.forget(merged)
		}
	}
	a.mu.Lock()
	ec, rcore := a.events, a.routing
	a.mu.Unlock()
	if ec != nil {
		ec.sub.SetWorkers(merged)
	}
	if rcore != nil {
		// the router gets the list here, when it changes, not with every request
		rcore.router.SetWorkers(set.routed)
		vals := map[string]float64{}
		for _, ag := range rcore.router.Agreements(set.routed) {
			vals[ag.Model] = 0
			if ag.Agreed {
				vals[ag.Model] = 1
			}
		}
		newest := true
		if st != nil {
			owner := st.newest()
			newest = owner == a || owner == nil
		}
		if newest {
			a.metrics.agreementSeries.set(vals) // the models of the newest config only
		}
	}
}

// updateIndexGauges sets caddy_kvroute_index_blocks{worker} from the subscriber's view and drops
// the series of workers the subscriber no longer tracks, so worker churn does not grow the label
// set.
func (a *App) updateIndexGauges() {
	ec := a.eventCore()
	if ec == nil {
		return
	}
	live := map[string]float64{}
	for _, w := range ec.sub.Stats().Workers {
		live[w.WorkerID] = float64(w.Blocks)
	}
	kvMetrics.indexSeries.set(live)
}

// markStarted releases the handlers waiting in waitStarted. Safe to call more than once.
func (a *App) markStarted() {
	if a.started != nil {
		a.startedOnce.Do(func() { close(a.started) })
	}
}

// waitStarted blocks until the app has started (or failed to), ctx ends, or max elapses.
func (a *App) waitStarted(ctx context.Context, max time.Duration) {
	if a.started == nil {
		return
	}
	select {
	case <-a.started:
		return
	default:
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-a.started:
	case <-ctx.Done():
	case <-t.C:
	}
}

// registryRecords is the worker records of st's registry once it has been read; before that (a
// reload to another nats_url or embedded_nats whose registry is not read yet: unreachable, or
// still connecting) the records last read from the previous one (lastknown.go), logged once.
// Every read of a registry is remembered for the next such reload.
func (a *App) registryRecords(st *sharedNATS) []registry.Worker {
	select {
	case <-st.watcher.Ready():
		ws := st.watcher.Snapshot()
		if lk := a.shared.lastKnown; lk != nil {
			lk.set(st.url, ws)
		}
		return ws
	default:
	}
	if lk := a.shared.lastKnown; lk != nil {
		if from, ws := lk.from(st.url); len(ws) > 0 {
			if a.lastKnownLogged.CompareAndSwap(false, true) {
				a.logger.Warn("worker registry not read yet on the new NATS connection; routing to the workers last read from the previous one until it is",
					zap.String("nats", st.url), zap.String("previous_nats", from), zap.Int("workers", len(ws)))
			}
			return ws
		}
	}
	return st.watcher.Snapshot()
}
