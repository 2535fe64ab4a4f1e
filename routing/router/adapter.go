package router

import (
	"sort"
	"strconv"
	"sync"
)

// LoRA adapters (DESIGN.md §1.1): which workers a request whose `model` names an adapter may go
// to, and the adapter name its blocks are hashed with.
//
// vLLM keys an adapter's blocks with the adapter's name: generate_block_hash_extra_keys puts
// _gen_lora_extra_hash_keys (`[request.lora_request.lora_name]`) first in every block's extra keys
// (vllm/v1/core/kv_cache_utils.py @001cabc1), and each BlockStored event of such a request carries
// `lora_name` (vllm/distributed/kv_events.py @0181ea31; `lora_id` is deprecated). kvevents/normalize
// seeds an event's blocks with blocks.SeedFor(lora_name, salt); the request side uses the same
// seed with the adapter's name, so a base-model request and an adapter request never share a
// block, and two adapters do not either.

// maxRememberedAdapters bounds the adapters a router remembers from earlier worker lists.
const maxRememberedAdapters = 4096

// Adapter is one LoRA adapter a worker serves: the registry record's `adapters` entry.
type Adapter struct {
	// Name is the adapter's served name: a request's `model`, an event's `lora_name`.
	Name string
	// BaseModel is the model the adapter applies to (the worker's Model when the record did not say).
	BaseModel string
}

// adapter returns w's adapter named name by binary search: w.Adapters is sorted by name (the
// registry normalizes records so, and caddymodule converts them in that order).
func (w *Worker) adapter(name string) (Adapter, bool) {
	as := w.Adapters
	i := sort.Search(len(as), func(i int) bool { return as[i].Name >= name })
	if i < len(as) && as[i].Name == name {
		return as[i], true
	}
	return Adapter{}, false
}

// target is what a request's model selects among the workers.
type target struct {
	workers []Worker
	// matched: some worker declares the model, or lists the adapter (workers are those).
	matched bool
	// lora is the adapter name the blocks are hashed with ("" for a base model).
	lora string
	// adapter and base describe a request that names a LoRA adapter: its name and its base model
	// ("" when not known). notServed: no worker lists it now (known from an earlier list).
	adapter, base string
	notServed     bool
}

// targetFor resolves model over all: the workers whose Model is model (a base model request);
// else those that list an adapter named model (an adapter request, hashed with its name); else,
// when an earlier worker list named model as an adapter, the workers of its base model, or all
// when none (adapter_not_served); else every worker, unmatched (a model no record declares).
func (r *Router) targetFor(all []Worker, model string) target {
	ws, matched := workersFor(all, model)
	if matched || model == "" {
		return target{workers: ws, matched: matched}
	}
	var serving []Worker
	base := ""
	for i := range all {
		if a, ok := all[i].adapter(model); ok {
			serving = append(serving, all[i])
			if base == "" {
				base = a.BaseModel
			}
		}
	}
	if len(serving) > 0 {
		sort.Slice(serving, func(i, j int) bool { return serving[i].ID < serving[j].ID })
		return target{workers: serving, matched: true, lora: model, adapter: model, base: base}
	}
	base, known := r.adapters.base(model)
	if !known {
		return target{workers: ws}
	}
	t := target{adapter: model, base: base, notServed: true}
	if bw, ok := workersFor(all, base); ok && base != "" {
		t.workers = bw
	} else {
		t.workers = ws
	}
	return t
}

// notServedDetail is the log detail of an adapter_not_served decision.
func (t *target) notServedDetail() string {
	if t.base == "" {
		return "no worker serves adapter " + strconv.Quote(t.adapter) + "; routed on load"
	}
	return "no worker serves adapter " + strconv.Quote(t.adapter) + "; routed on load over the workers of " + strconv.Quote(t.base)
}

// adapterMemory remembers the adapters earlier worker lists named (adapter → base model), so a
// request for an adapter whose workers left or unloaded it is still known as an adapter of its
// base model. Bounded: beyond maxRememberedAdapters the oldest is forgotten. Safe for concurrent use.
type adapterMemory struct {
	mu    sync.Mutex
	bases map[string]string
	order []string
}

// learn records the adapters of ws (a full worker list).
func (m *adapterMemory) learn(ws []Worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bases == nil {
		m.bases = map[string]string{}
	}
	for i := range ws {
		for _, a := range ws[i].Adapters {
			if _, ok := m.bases[a.Name]; !ok {
				m.order = append(m.order, a.Name)
				if len(m.order) > maxRememberedAdapters {
					delete(m.bases, m.order[0])
					m.order = m.order[1:]
				}
			}
			m.bases[a.Name] = a.BaseModel
		}
	}
}

// base returns the remembered base model of adapter name.
func (m *adapterMemory) base(name string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bases[name]
	return b, ok
}
