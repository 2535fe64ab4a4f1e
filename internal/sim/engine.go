package sim

import (
	"context"
	"time"
)

// engine is the worker's timing model, so that time to first token shows what caching and load do:
//
//   - At most MaxRunning sequences run at once (vLLM's max_num_seqs); a request beyond it waits,
//     first come first served, until a running one finishes its decode.
//   - With PrefillPerToken > 0, prefill is one serial resource per worker (the GPU runs one prefill
//     batch at a time): a request's prefill waits for the prefills admitted before it, then takes
//     PrefillDelay + PrefillPerToken × uncached prompt tokens. The prefix cache is consulted when the
//     prefill starts, as vLLM's scheduler does when it schedules a waiting request.
//   - Decode takes TokenDelay per further output token and runs concurrently across sequences.
//
// With the defaults (MaxRunning 0, PrefillPerToken 0) nothing waits and prefill takes PrefillDelay,
// the first version's behaviour.
type engine struct {
	// slots holds one token per running sequence (nil: unlimited). Go queues blocked senders on a
	// channel in arrival order, which makes the wait first come first served.
	slots chan struct{}
	// prefill is a one-token lock around each prefill when PrefillPerToken > 0 (nil otherwise).
	prefill chan struct{}

	prefillDelay, perToken time.Duration
}

func newEngine(c *Config) *engine {
	e := &engine{prefillDelay: c.PrefillDelay, perToken: c.PrefillPerToken}
	if c.MaxRunning > 0 {
		e.slots = make(chan struct{}, c.MaxRunning)
	}
	if c.PrefillPerToken > 0 {
		e.prefill = make(chan struct{}, 1)
	}
	return e
}

// admit waits for a running slot; release frees it. It reports false when ctx ended first.
func (e *engine) admit(ctx context.Context) (release func(), ok bool) {
	if e.slots == nil {
		return func() {}, true
	}
	select {
	case e.slots <- struct{}{}:
		return func() { <-e.slots }, true
	case <-ctx.Done():
		return nil, false
	}
}

// runPrefill waits for the worker's prefill resource, asks lookup for the prompt's uncached tokens
// (the cache is consulted when the prefill starts), waits the prefill time and runs done before the
// resource is released (the new blocks are stored before the next prefill looks). It reports false
// when ctx ended first; done then does not run.
func (e *engine) runPrefill(ctx context.Context, lookup func() (uncached int), done func()) bool {
	if e.prefill != nil {
		select {
		case e.prefill <- struct{}{}:
			defer func() { <-e.prefill }()
		case <-ctx.Done():
			return false
		}
	}
	uncached := lookup()
	if !wait(ctx, e.prefillTime(uncached)) {
		return false
	}
	done()
	return true
}

// prefillTime is PrefillDelay + PrefillPerToken × uncached tokens.
func (e *engine) prefillTime(uncached int) time.Duration {
	return e.prefillDelay + time.Duration(max(uncached, 0))*e.perToken
}
