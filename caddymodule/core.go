package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/subscriber"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// eventCore is the KV index and the event subscriber that feeds it. It lives in the NATS state, so
// config reloads keep the index (DESIGN.md §9). The first config that starts creates it; every
// config that starts applies its settings to it (natsState.activate, eventCore.configure), so a
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

// coreSettings is what one config applies to the shared event core: the index bounds, the model
// whose placeholder ids the subscriber normalizes events with (nil: the Qwen3-VL defaults, as for a
// text-only model), and its router's layout verifier (nil without model_dir).
type coreSettings struct {
	index  *index.Config
	model  *model.Model
	verify subscriber.StoredFunc
}

// configure applies s to the core. The core outlives config reloads, so every config applies its
// settings when it starts, like the settings of its own router (the pattern of caddy-ratelimit,
// which re-applies each config's settings to the rate limiters it keeps across reloads).
func (ec *eventCore) configure(s *coreSettings) error {
	if err := ec.index.SetLimits(s.index); err != nil {
		return fmt.Errorf("applying index bounds: %w", err)
	}
	ec.sub.SetPads(modelPads(s.model))
	ec.sub.SetOnStored(s.verify)
	return nil
}

// activate applies a's settings to the state's event core and records a as the newest running
// config. Called at the end of a's start, so a config that fails to start changes nothing.
func (st *natsState) activate(a *App, s *coreSettings) error {
	st.coreMu.Lock()
	defer st.coreMu.Unlock()
	if st.events == nil {
		return errors.New("applying settings: the event core is stopped")
	}
	if err := st.events.configure(s); err != nil {
		return err
	}
	st.running = append(st.running, runningConfig{app: a, settings: s})
	return nil
}

// deactivate forgets a stopping config. When it was the newest (Caddy rolls a failed reload back
// by stopping the new config while the old one keeps running), the settings of the config that is
// now the newest are applied again.
func (st *natsState) deactivate(a *App) {
	st.coreMu.Lock()
	defer st.coreMu.Unlock()
	i := slices.IndexFunc(st.running, func(r runningConfig) bool { return r.app == a })
	if i < 0 {
		return
	}
	newest := i == len(st.running)-1
	st.running = slices.Delete(st.running, i, i+1)
	if !newest || len(st.running) == 0 || st.events == nil {
		return
	}
	if err := st.events.configure(st.running[len(st.running)-1].settings); err != nil {
		st.logger.Error("re-applying the running config's settings to the event core", zap.Error(err))
	}
}

// newest returns the newest running config, nil when none runs.
func (st *natsState) newest() *App {
	st.coreMu.Lock()
	defer st.coreMu.Unlock()
	if len(st.running) == 0 {
		return nil
	}
	return st.running[len(st.running)-1].app
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
	live := map[string]float64{}
	for _, w := range ec.sub.Stats().Workers {
		live[w.WorkerID] = float64(w.Blocks)
	}
	kvMetrics.indexSeries.set(live)
}
