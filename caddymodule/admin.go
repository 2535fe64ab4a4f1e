package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/routing/router"
)

func init() {
	caddy.RegisterModule(Admin{})
}

// Admin is the `admin.api.kvroute` module: read-only routes on Caddy's admin endpoint
// (DESIGN.md §10).
//
//	GET /kvroute/workers  the workers (static and live) with their index state
//	GET /kvroute/stats    per-model agreement, index size and event counters
//	POST /kvroute/explain the routing view and decision for a chat request body (nothing forwarded)
type Admin struct{}

// CaddyModule returns the Caddy module information.
func (Admin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.kvroute",
		New: func() caddy.Module { return new(Admin) },
	}
}

// Routes returns the admin routes.
func (Admin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/kvroute/workers", Handler: caddy.AdminHandlerFunc(handleWorkers)},
		{Pattern: "/kvroute/stats", Handler: caddy.AdminHandlerFunc(handleStats)},
		{Pattern: "/kvroute/explain", Handler: caddy.AdminHandlerFunc(handleExplain)},
	}
}

// WorkerStatus is one element of GET /kvroute/workers.
type WorkerStatus struct {
	WorkerID       string `json:"worker_id"`
	Endpoint       string `json:"endpoint"`
	Model          string `json:"model"`
	Engine         string `json:"engine"`
	BlockSize      int    `json:"block_size"`
	ContractDigest string `json:"contract_digest"`
	Blocks         int64  `json:"blocks"`
	// LastSeq is the last applied event sequence number (rank 0); null before the first event.
	LastSeq *uint64 `json:"last_seq"`
	Healthy bool    `json:"healthy"`
	// ActivePrefillTokens, ActiveDecodeBlocks and RequestsInFlight are the worker's active load
	// (WorkerReading); LastEventAgeSeconds the seconds since its last KV event message, null before
	// the first.
	ActivePrefillTokens int64    `json:"active_prefill_tokens"`
	ActiveDecodeBlocks  int64    `json:"active_decode_blocks"`
	RequestsInFlight    int64    `json:"requests_in_flight"`
	LastEventAgeSeconds *float64 `json:"last_event_age_seconds"`
	// Adapters are the LoRA adapters the worker's record lists; absent when none.
	Adapters []registry.Adapter `json:"adapters,omitempty"`
}

// Stats is the body of GET /kvroute/stats.
type Stats struct {
	Models map[string]ModelStats `json:"models"`
	Index  IndexStats            `json:"index"`
	Events EventStats            `json:"events"`
	Router RouterStats           `json:"router"`
}

// RouterStats is the router's readings (RouterReading).
type RouterStats struct {
	NATSConnected   bool   `json:"nats_connected"`
	NATSReconnects  uint64 `json:"nats_reconnects"`
	RegistryWorkers int    `json:"registry_workers"`
	// RegistryDegraded is true while the registry bucket cannot be read (last known records kept).
	RegistryDegraded bool `json:"registry_degraded"`
	StaticWorkers    int  `json:"static_workers"`
	DecodeSlotsBusy  int  `json:"decode_slots_busy"`
	DecodeSlots      int  `json:"decode_slots"`
	// MediaInflightBytes is null while the router has no media in-flight budget.
	MediaInflightBytes *int64 `json:"media_inflight_bytes"`
}

// ModelStats is the agreement state of one model's workers (DESIGN.md §2.3).
type ModelStats struct {
	Workers            int  `json:"workers"`
	BlockSizeAgreement bool `json:"block_size_agreement"`
	ContractAgreement  bool `json:"contract_agreement"`
	// ContractDigest is the agreed contract's digest ("" without agreement).
	ContractDigest string `json:"contract_digest"`
	// Reason is the reason code that keeps exact video routing off ("" when it is on).
	Reason string `json:"reason"`
}

// IndexStats is the KV index size.
type IndexStats struct {
	Blocks int64 `json:"blocks"`
	Bytes  int64 `json:"bytes"`
}

// EventStats counts KV events and registry records.
type EventStats struct {
	Received       uint64 `json:"received"`
	Applied        uint64 `json:"applied"`
	Dropped        uint64 `json:"dropped"`
	InvalidRecords uint64 `json:"invalid_records"`
	// Results counts every subscriber result by name (applied, gap, replayed, decode_error, …).
	Results map[string]uint64 `json:"results"`
}

// runningApp returns the kvroute app of the running config.
func runningApp() (*App, error) {
	ctx := caddy.ActiveContext()
	appIface, err := ctx.AppIfConfigured("kvroute")
	if err != nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("kvroute app is not running: %w", err)}
	}
	return appIface.(*App), nil
}

func onlyGET(r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: errors.New("method not allowed")}
	}
	return nil
}

func handleWorkers(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(r); err != nil {
		return err
	}
	a, err := runningApp()
	if err != nil {
		return err
	}
	out := workerStatuses(a)
	return writeJSON(w, out)
}

// workerStatuses lists the app's workers with their index state and readings (readings.go);
// healthy is false while this replica has the worker marked down (HealthChecks).
func workerStatuses(a *App) []WorkerStatus {
	ws := a.WorkerList()
	states := a.workerReadings()
	ec := a.eventCore()
	out := make([]WorkerStatus, 0, len(ws))
	for i, wk := range ws {
		st := WorkerStatus{
			WorkerID: wk.WorkerID, Endpoint: wk.Endpoint, Model: wk.Model, Engine: wk.Engine,
			BlockSize: wk.BlockSize, ContractDigest: router.ContractDigest(wk.Contract), Healthy: !a.health.Load().isDown(wk.WorkerID),
			Adapters: wk.Adapters,
		}
		if ec != nil {
			if s, ok := ec.sub.Worker(wk.WorkerID); ok {
				st.Blocks, st.LastSeq = int64(s.Blocks), s.LastSeq
			}
		}
		if i < len(states) && states[i].WorkerID == wk.WorkerID { // same list unless it changed in between
			ps := states[i]
			st.Healthy = ps.Healthy
			st.ActivePrefillTokens, st.ActiveDecodeBlocks, st.RequestsInFlight = ps.ActivePrefillTokens, ps.ActiveDecodeBlocks, ps.RequestsInFlight
			if ps.LastEventAge >= 0 {
				age := ps.LastEventAge.Seconds()
				st.LastEventAgeSeconds = &age
			}
		}
		out = append(out, st)
	}
	return out
}

func handleStats(w http.ResponseWriter, r *http.Request) error {
	if err := onlyGET(r); err != nil {
		return err
	}
	a, err := runningApp()
	if err != nil {
		return err
	}
	return writeJSON(w, appStats(a))
}

// appStats summarizes the app. Contract agreement stays false until contracts are checked.
func appStats(a *App) Stats {
	st := Stats{Models: map[string]ModelStats{}}
	blockSizes := map[string]map[int]bool{}
	for _, wk := range a.WorkerList() {
		ms := st.Models[wk.Model]
		ms.Workers++
		st.Models[wk.Model] = ms
		if blockSizes[wk.Model] == nil {
			blockSizes[wk.Model] = map[int]bool{}
		}
		blockSizes[wk.Model][wk.BlockSize] = true
	}
	models := make([]string, 0, len(st.Models))
	for m := range st.Models {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		ms := st.Models[m]
		ms.BlockSizeAgreement = len(blockSizes[m]) == 1
		st.Models[m] = ms
	}
	if rc := a.routingCore(); rc != nil {
		for _, ag := range rc.router.Agreements(routerWorkers(a.WorkerList())) {
			ms := st.Models[ag.Model]
			ms.ContractAgreement, ms.ContractDigest, ms.Reason = ag.Agreed, ag.Digest, string(ag.Reason)
			st.Models[ag.Model] = ms
		}
	}
	if ec := a.eventCore(); ec != nil {
		is := ec.index.Stats()
		st.Index = IndexStats{Blocks: int64(is.Blocks), Bytes: is.Bytes}
		ss := ec.sub.Stats()
		st.Events.Received = ss.Events["applied"] + ss.Events["duplicate"] + ss.Events["buffered"] + ss.Events["decode_error"] +
			ss.Events["bad_header"] + ss.Events["dropped_unregistered"]
		st.Events.Applied = ss.Events["applied"] + ss.Events["replayed"]
		st.Events.Dropped = ss.Dropped + ss.Events["decode_error"] + ss.Events["bad_header"] + ss.Events["dropped_unregistered"]
		st.Events.Results = ss.Events
	}
	if n := a.NATS(); n != nil {
		st.Events.InvalidRecords = n.Watcher().Invalid()
	}
	rs := a.routerReading()
	st.Router = RouterStats{NATSConnected: rs.NATSConnected, NATSReconnects: rs.NATSReconnects, RegistryWorkers: rs.RegistryWorkers,
		RegistryDegraded: rs.RegistryDegraded, StaticWorkers: rs.StaticWorkers, DecodeSlotsBusy: rs.DecodeSlotsBusy, DecodeSlots: rs.DecodeSlots}
	if rs.HasMediaInflight {
		b := rs.MediaInflightBytes
		st.Router.MediaInflightBytes = &b
	}
	return st
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("encoding response: %w", err)}
	}
	return nil
}

// Interface guards
var _ caddy.AdminRouter = (*Admin)(nil)
