package caddymodule

import (
	"context"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/loadsync"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/router"
)

// routingCore is one config's routing core: the router over the shared index, and what it owns.
type routingCore struct {
	router  *router.Router
	fetcher *fetch.Fetcher
	sync    *loadsync.Sync // replica load sharing (DESIGN.md §9); nil without NATS
	decoder *media.Decoder // for the decode-slot gauges (readings.go)
	budget  *fetch.Budget  // the process-wide media bytes in flight, shared across reloads (readings.go)
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
	if st := d.app.runningNATS(); st != nil {
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
