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
//
// A prefill that runs well past its accounted tokens (overrunFactor, overrunMarginTokens) had less
// cached than the router credited: the worker evicted the prefix before the prefill started (its
// capacity unknown, or the ages under-stated). The router cannot see how much was lost until the
// first byte, so from then on it takes the worst case, the whole prompt, and counts the rest of it
// (prompt − ran) as still queued on the worker (overrun_tokens). Without this, the worker whose
// prefill overran looked idle for as long as the lost credit takes to prefill again (2 s for a
// 46k-token prompt in the eighth pass's replay of 3300:150@1.3) and drew every request meanwhile.
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

// overrunFactor and overrunMarginTokens decide that a prefill overran its prediction: it has run for
// more than overrunFactor · its accounted tokens + overrunMarginTokens at the learned time per token.
// The factor leaves room for the learned time per token being low (an EWMA, progressAlpha), the
// margin for the fixed per-request part of a small prefill (scheduling, the network, the first
// decode step: 512 tokens are about 24 ms at 46 µs per token).
const (
	overrunFactor       = 1.5
	overrunMarginTokens = 512
)

// progressEntry is one request without a first byte: its accounted uncached tokens, its whole
// prompt (worst: the prefill if none of the credit survived, at least tokens) and its Begin time.
type progressEntry struct {
	tokens, worst int64
	began         time.Time
}

// push appends a request of tokens accounted uncached tokens (worst: its whole prompt) routed now;
// the element is its handle's.
func (p *prefillProgress) push(tokens, worst int64, now time.Time) *list.Element {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queue.PushBack(progressEntry{tokens: tokens, worst: max(worst, tokens), began: now})
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

// done returns the accounted prefill tokens of the oldest request without a first byte that have
// run by now, and, once that prefill overran its prediction, the rest of its worst case still to
// run (overrun). Both 0 while the time per token is unknown.
func (p *prefillProgress) done(now time.Time) (done, overrun int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.queue.Front()
	if e == nil || p.perToken == 0 {
		return 0, 0
	}
	en := e.Value.(progressEntry)
	ran := int64(math.Round(now.Sub(p.started(en)).Seconds() / p.perToken))
	if ran <= en.tokens {
		return max(ran, 0), 0
	}
	if en.overran(ran) {
		return en.tokens, max(en.worst-ran, 0)
	}
	return en.tokens, 0
}

// overran reports whether a prefill that has run for ran tokens' time is past its prediction.
func (en progressEntry) overran(ran int64) bool {
	return en.worst > en.tokens && float64(ran) > overrunFactor*float64(en.tokens)+overrunMarginTokens
}

// started is when en's prefill began: its Begin, or the previous first byte on the worker if that
// came later (the engine prefills in arrival order). Called with p.mu held.
func (p *prefillProgress) started(en progressEntry) time.Time {
	if p.lastFB.After(en.began) {
		return p.lastFB
	}
	return en.began
}
