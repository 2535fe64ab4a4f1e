package scheduler

import (
	"container/list"
	"math"
	"sync"
	"time"
)

// prefillProgress estimates how much of a worker's queued prefill has already run (ttft2).
//
// The tracker counts a request's uncached prompt tokens from Begin until its first response
// byte, so the prefill running at that moment counts whole although part of it is done: for a
// 20k-token prompt at 46 µs/token up to 0.9 s of work that is no longer ahead of a new request,
// as large as the whole queue on a moderately loaded worker. An engine prefills in arrival order
// (vLLM's FCFS scheduler; chunked prefill spends its token budget on the oldest waiting request
// first), so the work done since the last first byte went into the oldest request without one.
// prefillProgress keeps the requests without a first byte in Begin order and the worker's
// prefill time per token, learned from this router's own requests: a request's prefill began at
// its Begin or at the previous first byte on the worker, whichever is later, and ended at its own
// first byte. Done tokens are min(elapsed / time_per_token, the oldest request's tokens).
type prefillProgress struct {
	mu     sync.Mutex
	queue  list.List // progressEntry, Begin order: the requests without a first byte
	lastFB time.Time // the last first byte (or failed prefill) on the worker
	// perToken is the learned prefill time per uncached token, an EWMA (0: unknown).
	perToken float64
}

// minSampleTokens is the smallest prefill that teaches the time per token: below it the fixed
// per-request overhead (scheduling, network, the first decode step) dominates.
const minSampleTokens = 256

// progressAlpha is the EWMA weight of a new time-per-token sample.
const progressAlpha = 0.2

// progressEntry is one request without a first byte: its uncached tokens and its Begin time.
type progressEntry struct {
	tokens int64
	began  time.Time
}

// push appends a request of tokens uncached prompt tokens routed now; the element is its handle's.
func (p *prefillProgress) push(tokens int64, now time.Time) *list.Element {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queue.PushBack(progressEntry{tokens: tokens, began: now})
}

// firstByte removes e and, when it learns, folds its prefill time into perToken.
// Learn is false for a request that ended or moved before its first byte.
func (p *prefillProgress) firstByte(e *list.Element, now time.Time, learn bool) {
	if e == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	en := p.queue.Remove(e).(progressEntry)
	start := p.started(en)
	p.lastFB = now
	if !learn || en.tokens < minSampleTokens {
		return
	}
	if d := now.Sub(start).Seconds(); d > 0 {
		s := d / float64(en.tokens)
		if p.perToken == 0 {
			p.perToken = s
		} else {
			p.perToken += progressAlpha * (s - p.perToken)
		}
	}
}

// done returns the prefill tokens of the oldest request without a first byte that have run by now
// (0 while the time per token is unknown).
func (p *prefillProgress) done(now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.queue.Front()
	if e == nil || p.perToken == 0 {
		return 0
	}
	en := e.Value.(progressEntry)
	ran := int64(math.Round(now.Sub(p.started(en)).Seconds() / p.perToken))
	return max(min(ran, en.tokens), 0)
}

// started is when en's prefill began: its Begin, or the previous first byte on the worker if that
// came later (the engine prefills in arrival order). Called with p.mu held.
func (p *prefillProgress) started(en progressEntry) time.Time {
	if p.lastFB.After(en.began) {
		return p.lastFB
	}
	return en.began
}
