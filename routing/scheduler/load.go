package scheduler

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/kv/index"
)

// Load is a snapshot of one worker's active load as accounted by this router (plus deltas applied
// from replicas). Its JSON keys are those of DESIGN.md §7 (explain lists them per candidate).
type Load struct {
	// PrefillTokens counts uncached prompt tokens of requests that have not produced a first byte.
	PrefillTokens int64 `json:"active_prefill_tokens"`
	// DecodeBlocks counts prompt blocks of requests that have not finished.
	DecodeBlocks int64 `json:"active_decode_blocks"`
	// Requests counts requests that have not finished.
	Requests int64 `json:"active_requests"`
}

// workerLoad holds one worker's counters. Atomics: updated from response goroutines without a lock.
type workerLoad struct {
	prefill, decode, requests atomic.Int64
	// slots learns the worker's running limit from this router's requests (slots.go, ttft2).
	slots slotLearner
	// prog estimates the share of the queued prefill already run (progress.go, ttft2).
	prog prefillProgress
}

// Tracker accounts active load per worker (DESIGN.md §1 step 7, Dynamo's slot tracker: AddRequest,
// MarkPrefillCompleted, Free). The zero value is not usable; use NewTracker.
type Tracker struct {
	// mu protects the loads map; the counters inside are atomics.
	mu    sync.RWMutex
	loads map[index.WorkerKey]*workerLoad
	// pending holds the prefix keys of the requests in flight per worker (pending.go, ttft2).
	pending *pendingSet
	// now is the clock of the prefill progress (progress.go); time.Now but in tests.
	now func() time.Time
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{loads: make(map[index.WorkerKey]*workerLoad), pending: newPendingSet(), now: time.Now}
}

// lookup returns worker w's counters, nil for a worker never seen (or forgotten).
func (t *Tracker) lookup(w index.WorkerKey) *workerLoad {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.loads[w]
}

func (t *Tracker) get(w index.WorkerKey) *workerLoad {
	l := t.lookup(w)
	if l != nil {
		return l
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if l = t.loads[w]; l == nil {
		l = new(workerLoad)
		t.loads[w] = l
	}
	return l
}

// Load returns the worker's current load (zero for a worker never seen).
func (t *Tracker) Load(w index.WorkerKey) Load {
	l := t.lookup(w)
	if l == nil {
		return Load{}
	}
	return Load{PrefillTokens: l.prefill.Load(), DecodeBlocks: l.decode.Load(), Requests: l.requests.Load()}
}

// Adjust adds deltas to a worker's load without a handle (replica sync, DESIGN.md §9). Negative deltas
// subtract; the caller keeps them balanced.
func (t *Tracker) Adjust(w index.WorkerKey, prefillTokens, decodeBlocks, requests int64) {
	l := t.get(w)
	l.prefill.Add(prefillTokens)
	l.decode.Add(decodeBlocks)
	l.requests.Add(requests)
}

// Forget drops a worker's counters (after the worker left). Handles still open keep updating the
// dropped counters, which no longer count.
func (t *Tracker) Forget(w index.WorkerKey) {
	t.mu.Lock()
	delete(t.loads, w)
	t.mu.Unlock()
}

// Begin accounts one routed request on worker w: prefillTokens (uncached prompt tokens, clamped at 0)
// until FirstByte, decodeBlocks (prompt blocks, clamped at 0) until Done.
func (t *Tracker) Begin(w index.WorkerKey, prefillTokens, decodeBlocks int64) *Handle {
	return t.begin(w, prefillTokens, prefillTokens, decodeBlocks)
}

// begin is Begin with worst, the request's prefill if none of its credit survives (progress.go).
func (t *Tracker) begin(w index.WorkerKey, prefillTokens, worst, decodeBlocks int64) *Handle {
	prefillTokens, decodeBlocks = max(prefillTokens, 0), max(decodeBlocks, 0)
	worst = max(worst, prefillTokens)
	l := t.get(w)
	l.prefill.Add(prefillTokens)
	l.decode.Add(decodeBlocks)
	l.requests.Add(1)
	l.slots.begin()
	return &Handle{tracker: t, worker: w, load: l, prefill: prefillTokens, decode: decodeBlocks, worst: worst,
		prog: l.prog.push(prefillTokens, worst, t.now())}
}

// Handle releases the load of one request. Its methods are idempotent and safe from any goroutine.
type Handle struct {
	tracker *Tracker
	// mu orders Move against the releases, so each count moves or is released exactly once.
	mu              sync.Mutex
	worker          index.WorkerKey
	load            *workerLoad
	prefill, decode int64
	// worst is the request's prefill if none of its credit survives (its whole prompt; prefill when
	// unknown), for the prefill progress's overrun (progress.go).
	worst           int64
	firstByte, done bool
	// fbSeq is the worker's event number at the first byte (slots.go).
	fbSeq uint64
	// keys are the request's prefix keys held in the tracker's pending set until Done (ttft2).
	keys []uint64
	// prog is the request's place in its worker's prefill progress until the first byte.
	prog *list.Element
}

// beginPending is Begin holding the request's prefix keys as the worker's pending prefix until
// Done, with promptTokens as the prefill's worst case (progress.go). The keys are added before the
// load, so whoever sees the request in flight sees its prefix pending too.
func (t *Tracker) beginPending(w index.WorkerKey, prefillTokens, promptTokens, decodeBlocks int64, keys []uint64) *Handle {
	t.pending.add(w, keys)
	h := t.begin(w, prefillTokens, promptTokens, decodeBlocks)
	h.keys = keys
	return h
}

// Worker returns the worker the handle accounts on now (after any Move).
func (h *Handle) Worker() index.WorkerKey {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.worker
}

// Move re-targets the load the request still holds to worker w: its decode blocks and its one
// request, and, before the first byte, its prefill as prefillTokens (w's uncached prompt tokens,
// clamped at 0) instead of the first worker's. Used when the proxy sends the request to another
// worker than the decision chose (a retry, a down or full upstream). A no-op on a nil or done
// handle, or when w is the current worker.
func (h *Handle) Move(w index.WorkerKey, prefillTokens int64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || w == h.worker {
		return
	}
	to := h.tracker.get(w)
	if !h.firstByte {
		h.load.prefill.Add(-h.prefill)
		h.load.prog.firstByte(h.prog, h.tracker.now(), false)
		h.prefill = max(prefillTokens, 0)
		to.prefill.Add(h.prefill)
		h.worst = max(h.worst, h.prefill)
		h.prog = to.prog.push(h.prefill, h.worst, h.tracker.now())
	}
	h.load.decode.Add(-h.decode)
	h.load.requests.Add(-1)
	h.load.slots.leave(h.firstByte)
	to.decode.Add(h.decode)
	to.requests.Add(1)
	to.slots.join(h.firstByte)
	h.tracker.pending.remove(h.worker, h.keys)
	h.tracker.pending.add(w, h.keys)
	h.worker, h.load = w, to
}

// FirstByte releases the request's prefill tokens (the worker produced its first response byte).
func (h *Handle) FirstByte() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done && !h.firstByte {
		h.fbSeq = h.load.slots.firstByte()
		h.load.prog.firstByte(h.prog, h.tracker.now(), true)
		h.prog = nil
	}
	h.releasePrefill()
}

func (h *Handle) releasePrefill() {
	if !h.firstByte {
		h.firstByte = true
		h.load.prefill.Add(-h.prefill)
		h.load.prog.firstByte(h.prog, h.tracker.now(), false)
		h.prog = nil
	}
}

// Done releases everything the request still holds (response ended, failed or the client went away).
func (h *Handle) Done() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.load.slots.done(h.firstByte, h.fbSeq)
	}
	h.releasePrefill()
	if !h.done {
		h.done = true
		h.load.decode.Add(-h.decode)
		h.load.requests.Add(-1)
		h.tracker.pending.remove(h.worker, h.keys)
	}
}

// PrefillDone returns the accounted uncached tokens of worker w's oldest request without a first
// byte that have run by now and, once that prefill overran its prediction, the rest of its whole
// prompt still to run (overrun), as prefillProgress estimates (both 0 while unknown).
func (t *Tracker) PrefillDone(w index.WorkerKey) (done, overrun int64) {
	l := t.lookup(w)
	if l == nil {
		return 0, 0
	}
	return l.prog.done(t.now())
}
