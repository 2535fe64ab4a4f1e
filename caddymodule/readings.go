package caddymodule

import (
	"sync"
	"time"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// Readings of the router and of each worker (issue 15), read by /metrics (readings_metrics.go)
// and the admin API (/kvroute/workers, /kvroute/stats).

// WorkerReading is what the router reads of one listed worker now.
type WorkerReading struct {
	WorkerID string
	// ActivePrefillTokens, ActiveDecodeBlocks and RequestsInFlight are the worker's active load
	// as this router accounts it (DESIGN.md §1 step 7), plus the load replicas share on
	// kvroute.sync.load: uncached prompt tokens before the first response byte, prompt blocks and
	// requests until the response ends.
	ActivePrefillTokens int64
	ActiveDecodeBlocks  int64
	RequestsInFlight    int64
	// Healthy is false while this replica has the worker marked down (passive failure or failed
	// health probe, health.go); caddy_kvroute_worker_healthy and /kvroute/workers show it.
	Healthy bool
	// LastEventAge is the time since the worker's last KV event message arrived; negative before
	// the first one (since the router started).
	LastEventAge time.Duration
	// IndexBlocks is the worker's block count in the index, all ranks.
	IndexBlocks int64
}

// RouterReading is what the router reads of itself now.
type RouterReading struct {
	// NATSConnected is true while the NATS connection is up; NATSReconnects counts its
	// reconnections since it was opened (kept across config reloads).
	NATSConnected  bool
	NATSReconnects uint64
	// RegistryWorkers is the number of live records in the kvroute_workers bucket; StaticWorkers
	// the workers declared in the config.
	RegistryWorkers int
	StaticWorkers   int
	// RegistryDegraded is true while the kvroute_workers bucket cannot be read (or was not opened
	// yet): the router keeps the last known records (DESIGN.md §2.1).
	RegistryDegraded bool
	// DecodeSlotsBusy of DecodeSlots video decodes run now (0 of 0 without model_dir).
	DecodeSlotsBusy, DecodeSlots int
	// MediaInflightBytes is the media bytes held by requests in flight, when the router has such a
	// budget (HasMediaInflight); see routingCore.mediaInflightBytes.
	MediaInflightBytes int64
	HasMediaInflight   bool
}

// eventClock records when each registered worker's last KV event message arrived. It is fed by
// the subscriber's result counter (subscriber.Config.OnCount): a message counts when it reached
// the worker's stream, whatever its outcome.
type eventClock struct {
	mu   sync.Mutex
	last map[string]time.Time
	now  func() time.Time
}

func newEventClock() *eventClock {
	return &eventClock{last: map[string]time.Time{}, now: time.Now}
}

// arrivals are the subscriber results counted once per received message (the `received` of
// /kvroute/stats, unregistered workers excluded).
var arrivals = map[string]bool{"applied": true, "duplicate": true, "buffered": true, "decode_error": true, "bad_header": true}

func (c *eventClock) observe(worker, result string) {
	if worker == subscriber.UnregisteredWorker || !arrivals[result] {
		return
	}
	t := c.now()
	c.mu.Lock()
	c.last[worker] = t
	c.mu.Unlock()
}

// age returns the time since worker's last event message, and false before the first.
func (c *eventClock) age(worker string) (time.Duration, bool) {
	c.mu.Lock()
	t, ok := c.last[worker]
	c.mu.Unlock()
	if !ok {
		return 0, false
	}
	return c.now().Sub(t), true
}

// workerReadings returns the readings of every listed worker, sorted by worker id.
func (a *App) workerReadings() []WorkerReading {
	ws := a.WorkerList()
	ec := a.eventCore()
	out := make([]WorkerReading, 0, len(ws))
	for _, w := range ws {
		st := WorkerReading{WorkerID: w.WorkerID, Healthy: !a.health.Load().isDown(w.WorkerID), LastEventAge: -1}
		if ec != nil {
			l := ec.tracker.Load(index.WorkerKey{ID: w.WorkerID})
			st.ActivePrefillTokens, st.ActiveDecodeBlocks, st.RequestsInFlight = l.PrefillTokens, l.DecodeBlocks, l.Requests
			if age, ok := ec.lastEvent.age(w.WorkerID); ok {
				st.LastEventAge = age
			}
			if s, ok := ec.sub.Worker(w.WorkerID); ok {
				st.IndexBlocks = int64(s.Blocks)
			}
		}
		out = append(out, st)
	}
	return out
}

// routerReading returns the router's readings.
func (a *App) routerReading() RouterReading {
	st := RouterReading{StaticWorkers: len(a.static)}
	if n := a.NATS(); n != nil {
		st.NATSConnected = n.s.nc.IsConnected()
		st.NATSReconnects = n.s.nc.Stats().Reconnects
		st.RegistryWorkers = len(n.s.watcher.Snapshot())
		st.RegistryDegraded = n.s.watcher.Degraded()
	}
	if rc := a.routingCore(); rc != nil {
		if rc.decoder != nil {
			st.DecodeSlotsBusy, st.DecodeSlots = rc.decoder.SlotsBusy()
		}
		st.MediaInflightBytes, st.HasMediaInflight = rc.mediaInflightBytes()
	}
	return st
}

// mediaInflightBytes is the bytes reserved now in the process-wide media-in-flight budget
// (DESIGN.md §6, `media { max_inflight_bytes }`), shown as caddy_kvroute_media_inflight_bytes and
// in /kvroute/stats; false when the routing core has no budget.
func (c *routingCore) mediaInflightBytes() (int64, bool) {
	if c.budget == nil {
		return 0, false
	}
	return c.budget.Held(), true
}
