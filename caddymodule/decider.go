package caddymodule

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/loadsync"
	"github.com/kvroute/kvroute/routing/mediaresolver"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/router"
	"github.com/kvroute/kvroute/routing/scheduler"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

// routingCore is one config's routing core: the router over the shared index, and what it owns.
type routingCore struct {
	router  *router.Router
	fetcher *fetch.Fetcher
	sync    *loadsync.Sync // replica load sharing (DESIGN.md §9); nil without NATS
	decoder *media.Decoder // for the decode-slot gauges (state.go)
	budget  *fetch.Budget  // the process-wide media bytes in flight, shared across reloads (state.go)
}

func (c *routingCore) close() {
	if c == nil {
		return
	}
	if c.sync != nil {
		c.sync.Stop()
	}
	if c.fetcher != nil {
		c.fetcher.Close()
	}
}

// replicaID names this process among the routers sharing load on kvroute.sync.load.
var replicaID = newRequestID()[:16]

// loadedModel is the model folder read by Validate, kept for Start.
type loadedModel struct {
	model  *model.Model
	layout *layout.Model // nil for a text-only model
}

// loadModel loads and checks the configured model folder (tokenizer, chat template, config.json
// and, for a vision model, the processor configs); nil without model_dir. Validate calls it, so
// `caddy validate` rejects a model_dir that Start would reject; the result is kept and Start does
// not read the folder again.
func (a *App) loadModel() (*loadedModel, error) {
	if a.ModelDir == "" {
		return nil, nil
	}
	if a.model != nil {
		return a.model, nil
	}
	m, err := model.Load(a.ModelDir)
	if err != nil {
		return nil, fmt.Errorf("loading model: %w", err)
	}
	// Bounded tokenization (DESIGN.md §6 "Prompts"): a pre-token over 256 KiB routes on load
	// alone (prompt_too_costly). Set here, before the tokenizer is shared.
	m.Tokenizer.SetMaxWordBytes(tokenizer.DefaultMaxWordBytes)
	lm := &loadedModel{model: m}
	if m.Vision {
		if lm.layout, err = layout.LoadModel(a.ModelDir); err != nil {
			return nil, fmt.Errorf("loading model processor config: %w", err)
		}
	}
	a.model = lm
	return lm, nil
}

// newRoutingCore builds the router for model m over the shared index and load tracker.
func (a *App) newRoutingCore(loaded *loadedModel, ec *eventCore) (*routingCore, error) {
	rc := &a.RoutingConfig
	m, lm := loaded.model, loaded.layout
	a.setTokenizeCache(m) // before the router shares the tokenizer
	a.setMessageCache(m)  // and the template
	sched, err := scheduler.NewWithTracker(rc.Scheduler, nil, ec.tracker)
	if err != nil {
		return nil, fmt.Errorf("creating scheduler: %w", err)
	}
	f, err := fetch.New(rc.Media.fetchConfig())
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
	core := &routingCore{router: r, fetcher: f, decoder: dec, budget: a.RoutingConfig.Media.budget()}
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

// routerWorkers converts registry records to the router's view.
func routerWorkers(ws []registry.Worker) []router.Worker {
	out := make([]router.Worker, len(ws))
	for i, w := range ws {
		out[i] = router.Worker{ID: w.WorkerID, Endpoint: w.Endpoint, Model: w.Model, Engine: w.Engine,
			BlockSize: w.BlockSize, DPSize: w.DPSize, Features: w.Features, Contract: w.Contract, Adapters: routerAdapters(w.Adapters)}
	}
	return out
}

// routerDecider is the Decider backed by the routing core.
type routerDecider struct {
	app  *App
	core *routingCore
}

// Decide routes one request with the routing core.
func (d *routerDecider) Decide(ctx context.Context, in *RouteInput) (*Decision, error) {
	if in.Body == nil {
		// not a chat or completions POST: the handler did not read the body
		return notRouted(), nil
	}
	parent := ctx
	ctx = media.WithRequestID(ctx, in.RequestID) // FFmpeg log lines of this request's decodes
	ctx, spans := traceStages(ctx)               // stage spans when Caddy's tracing is on
	ws := in.routed
	if len(ws) != len(in.Workers) {
		ws = routerWorkers(in.Workers) // a RouteInput not made by the handler
	}
	rin := &router.Input{Path: in.Request.URL.Path, Body: in.Body, Workers: ws, Available: in.Available}
	if st := d.app.natsState(); st != nil {
		rin.IndexUnavailable = st.indexUnavailable()
	}
	res, err := d.core.router.Route(ctx, rin)
	spans.end(parent, res, err)
	if err != nil {
		return nil, err
	}
	dec := &Decision{Result: *res, handle: d.core.router.Begin(res)}
	if c := d.app.logger.Check(zap.DebugLevel, "routing detail"); c != nil && res.Detail != "" {
		c.Write(zap.String("request_id", in.RequestID), zap.String("fallback", string(res.Fallback)), zap.String("detail", res.Detail))
	}
	return dec, nil
}

// MediaInflightBytes is the number of bytes reserved now in the process-wide media budget this
// app's config uses (`media { max_inflight_bytes }`): fetch buffers and media held for decoding.
func (a *App) MediaInflightBytes() int64 { return a.RoutingConfig.Media.budget().Held() }
