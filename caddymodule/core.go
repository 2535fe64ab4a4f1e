package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/subscriber"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// eventCore is the KV index and the event subscriber that feeds it. It lives in the shared NATS, so
// config reloads keep the index (DESIGN.md §9). The first config that starts creates it; every
// config that starts applies its settings to it (sharedNATS.activate, eventCore.configure), so a
// reload that changes model_dir or the index bounds takes effect on the surviving core.
type eventCore struct {
	index *index.Index
	sub   *subscriber.Subscriber
	// tracker is the active-load accounting; shared by every config's scheduler so requests in
	// flight across a reload stay counted.
	tracker *scheduler.Tracker
	// lastEvent records when each worker's last KV event message arrived (readings.go).
	lastEvent *eventClock
}

// core returns the shared NATS's event core, creating and starting it on first use.
func (st *sharedNATS) core(cfg *index.Config, m *model.Model, logger *zap.Logger) (*eventCore, error) {
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
	// the subscriber outlives any one config: it runs until the shared NATS's Destruct
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

// activate applies a's settings to the shared NATS's event core and records a as the newest running
// config. Called at the end of a's start, so a config that fails to start changes nothing.
func (st *sharedNATS) activate(a *App, s *coreSettings) error {
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
func (st *sharedNATS) deactivate(a *App) {
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
func (st *sharedNATS) newest() *App {
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
func (st *sharedNATS) stopCore() {
	st.coreMu.Lock()
	defer st.coreMu.Unlock()
	if st.events != nil {
		st.events.sub.Stop()
		st.events = nil
	}
}
