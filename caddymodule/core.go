package caddymodule

import (
	"context"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/subscriber"
	"github.com/kvroute/kvroute/routing/index"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// eventCore is the KV index and the event subscriber that feeds it. It lives in the NATS state, so
// config reloads keep the index (DESIGN.md §9). The first config that starts creates it; every
// config that starts re-applies its model-dependent settings to it (eventCore.configure), so a
// reload that changes model_dir or the index bounds takes effect on the surviving core.
type eventCore struct {
	index *index.Index
	sub   *subscriber.Subscriber
	// tracker is the active-load accounting; shared by every config's scheduler so requests in
	// flight across a reload stay counted.
	tracker *scheduler.Tracker
	// lastEvent records when each worker's last KV event message arrived (state.go).
	lastEvent *eventClock
}

// core returns the state's event core, creating and starting it on first use.
func (st *natsState) core(cfg *index.Config, m *model.Model, logger *zap.Logger) (*eventCore, error) {
	st.coreMu.Lock()
	defer st.coreMu.Unlock()
	if st.events != nil {
		return st.events, nil
	}
	ix, err := index.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating KV index: %w", err)
	}
	scfg := subscriber.DefaultConfig()
	scfg.Logger = logger
	clock := newEventClock()
	scfg.OnCount = func(worker, result string, n uint64) {
		kvMetrics.events.WithLabelValues(worker, result).Add(float64(n))
		clock.observe(worker, result)
	}
	scfg.ImagePad, scfg.VideoPad = modelPads(m)
	sub, err := subscriber.New(scfg, st.nc, ix)
	if err != nil {
		return nil, fmt.Errorf("creating KV event subscriber: %w", err)
	}
	// the subscriber outlives any one config: it runs until the state's Destruct
	if err := sub.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("starting KV event subscriber: %w", err)
	}
	st.events = &eventCore{index: ix, sub: sub, tracker: scheduler.NewTracker(), lastEvent: clock}
	return st.events, nil
}

// configure applies one config's settings to the core: the index bounds and the model's
// placeholder ids the subscriber normalizes events with (Qwen3-VL's defaults for a text-only model
// or without model_dir, as when the core is created). Called at every config's Start, so these
// follow a reload like the settings of a config's own router (the pattern of caddy-ratelimit,
// which re-applies each config's settings to the rate limiters kept across reloads).
func (ec *eventCore) configure(cfg *index.Config, m *model.Model) error {
	if err := ec.index.SetLimits(cfg); err != nil {
		return fmt.Errorf("applying index bounds: %w", err)
	}
	ec.sub.SetPads(modelPads(m))
	return nil
}

// modelPads returns the placeholder ids of a vision model, 0, 0 (the subscriber's Qwen3-VL
// defaults) for a text-only model or none.
func modelPads(m *model.Model) (imagePad, videoPad uint32) {
	if m != nil && m.Vision {
		return m.TokenIDs.ImagePad, m.TokenIDs.VideoPad
	}
	return 0, 0
}

// stopCore stops the subscriber; called by Destruct before the connection closes.
func (st *natsState) stopCore() {
	st.coreMu.Lock()
	defer st.coreMu.Unlock()
	if st.events != nil {
		st.events.sub.Stop()
		st.events = nil
	}
}

// startRouting loads the model, gets the shared event core and installs the routing decider.
// Without model_dir the index still follows the workers' events, and requests route on load alone.
func (a *App) startRouting(st *natsState) error {
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
	if err := ec.configure(a.Index.indexConfig(), mm); err != nil {
		return err
	}
	var rcore *routingCore
	if m != nil {
		if rcore, err = a.newRoutingCore(m, ec); err != nil {
			return err
		}
		ec.sub.SetOnStored(rcore.router.VerifyStored)
		a.SetDecider(&routerDecider{app: a, core: rcore})
	} else {
		// a previous config's router must not verify this config's events
		ec.sub.SetOnStored(nil)
		a.logger.Warn("no model_dir configured: requests are routed on load alone")
	}
	a.mu.Lock()
	a.events, a.routing = ec, rcore
	a.mu.Unlock()
	return nil
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

// updateIndexGauges sets caddy_kvroute_index_blocks{worker} from the subscriber's view and drops
// the series of workers the subscriber no longer tracks, so worker churn does not grow the label
// set.
func (a *App) updateIndexGauges() {
	ec := a.eventCore()
	if ec == nil {
		return
	}
	live := map[string]bool{}
	for _, w := range ec.sub.Stats().Workers {
		live[w.WorkerID] = true
		kvMetrics.indexBlocks.WithLabelValues(w.WorkerID).Set(float64(w.Blocks))
	}
	a.mu.Lock()
	gone := a.indexSeries
	a.indexSeries = live
	a.mu.Unlock()
	for id := range gone {
		if !live[id] {
			kvMetrics.indexBlocks.DeleteLabelValues(id)
		}
	}
}
