package scheduler

import (
	"sort"
	"sync"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/index"
)

// Pending prefixes (ttft2, issue 26): the blocks of requests this router sent to a worker that
// the worker has not finished yet. The index learns a prompt's blocks from the worker's KV events
// after its prefill ran; on a busy worker that is seconds after the routing decision. A later
// request sharing the prefix (the next turn of a conversation sent while the previous one is
// still queued, or several requests over one document) sees no overlap anywhere in the index and
// goes wherever the queue is shortest: a miss, although the worker that has the prefix queued
// will have cached it by the time the later request's prefill starts (an engine prefills in
// arrival order and stores a request's blocks before it prefills the next: vLLM's scheduler,
// SGLang's radix cache insert after prefill). The router knows what it sent where, so it credits
// those blocks as if cached (SGLang's cache-aware router keeps only such an approximate tree,
// sgl-router src/policies/cache_aware.rs; Dynamo's approximate indexer, lib/llm/src/kv_router/
// approx.rs, does the same without KV events).

// PrefixKeys returns the chained keys of a request's block hashes: key i identifies the prefix
// hashes[0..i], so one key says the whole prefix matches. Keys are mixed with SplitMix64's
// finalizer (Steele, Lea, Flood 2014); a collision needs two 64-bit values to agree.
func PrefixKeys(hashes []kv.BlockHash) []uint64 {
	out := make([]uint64, len(hashes))
	k := uint64(0x9e3779b97f4a7c15)
	for i, h := range hashes {
		k = mix64(k*0x100000001b3 ^ uint64(h))
		out[i] = k
	}
	return out
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// pendingSet counts, per worker, the prefix keys of the requests in flight there. Memory is the
// keys of the requests in flight (one entry per block of each), released at Done.
type pendingSet struct {
	mu sync.Mutex
	w  map[index.WorkerKey]map[uint64]int32
}

func newPendingSet() *pendingSet {
	return &pendingSet{w: map[index.WorkerKey]map[uint64]int32{}}
}

func (p *pendingSet) add(w index.WorkerKey, keys []uint64) {
	if len(keys) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.w[w]
	if m == nil {
		m = make(map[uint64]int32, len(keys))
		p.w[w] = m
	}
	for _, k := range keys {
		m[k]++
	}
}

func (p *pendingSet) remove(w index.WorkerKey, keys []uint64) {
	if len(keys) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.w[w]
	if m == nil {
		return
	}
	for _, k := range keys {
		if m[k]--; m[k] <= 0 {
			delete(m, k)
		}
	}
	if len(m) == 0 {
		delete(p.w, w)
	}
}

// match returns how many leading keys of keys are held on w: the blocks of the longest prefix a
// request in flight there shares, and how many requests in flight there share all of it (0 when
// none). The keys are chained, so a held key i means keys 0..i are held too (by the same
// request), and a binary search finds the end: O(log n) lookups.
func (p *pendingSet) match(w index.WorkerKey, keys []uint64) (blocks, requests int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.w[w]
	if len(m) == 0 {
		return 0, 0
	}
	n := sort.Search(len(keys), func(i int) bool { return m[keys[i]] == 0 })
	if n == 0 {
		return 0, 0
	}
	return n, int(m[keys[n-1]])
}

// PendingBlocks returns the blocks of the request's prefix (keys from PrefixKeys) that requests
// this router sent to worker w and that have not finished share: what w will have cached when
// the request's prefill starts, although the index does not show it yet.
func (s *Scheduler) PendingBlocks(w index.WorkerKey, keys []uint64) int {
	n, _ := s.tracker.pending.match(w, keys)
	return n
}

// Pending returns PendingBlocks and how many requests in flight on w share all of those blocks
// with this one: the herd the request would join there (balance.go).
func (s *Scheduler) Pending(w index.WorkerKey, keys []uint64) (blocks, requests int) {
	return s.tracker.pending.match(w, keys)
}
