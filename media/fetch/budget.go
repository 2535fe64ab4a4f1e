package fetch

import (
	"context"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/kvroute/kvroute/reason"
)

// DefaultBudgetBytes is the default process-wide budget of media bytes in flight (1 GiB).
const DefaultBudgetBytes int64 = 1 << 30

// Budget bounds the media bytes that all requests of a process hold at once: the buffers a fetch
// fills and the decoded bytes of data: URLs, from the first byte read until the caller releases
// the media (after decoding). Reservations are taken before the memory is allocated; a request
// that cannot reserve within the wait gets reason.MediaBusy. Safe for concurrent use.
type Budget struct {
	sem  *semaphore.Weighted
	size int64
	wait time.Duration
	held atomic.Int64
}

// NewBudget returns a budget of size bytes (> 0); a request waits at most wait in total for its
// reservations.
func NewBudget(size int64, wait time.Duration) *Budget {
	return &Budget{sem: semaphore.NewWeighted(size), size: size, wait: wait}
}

// Size is the budget in bytes.
func (b *Budget) Size() int64 { return b.size }

// Held is the number of bytes reserved now.
func (b *Budget) Held() int64 { return b.held.Load() }

// hold is one fetch's reservations. A nil budget never blocks (no process-wide bound).
type hold struct {
	b      *Budget
	n      int64
	waited time.Duration
}

// reserve takes n more bytes. Without contention it does not wait; otherwise it waits at most what
// is left of the budget's wait for this hold, then fails with reason.MediaBusy. A done ctx returns
// ctx's error (the caller maps it as it maps a fetch error).
func (h *hold) reserve(ctx context.Context, n int64) error {
	if n <= 0 || h.b == nil {
		return nil
	}
	if n > h.b.size {
		return reason.New(reason.MediaBusy, "media needs %d bytes, more than the in-flight budget of %d", n, h.b.size)
	}
	if !h.b.sem.TryAcquire(n) {
		left := h.b.wait - h.waited
		if left <= 0 {
			return h.busy()
		}
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, left)
		err := h.b.sem.Acquire(wctx, n)
		cancel()
		h.waited += time.Since(start)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return h.busy()
		}
	}
	h.n += n
	h.b.held.Add(n)
	return nil
}

func (h *hold) busy() error {
	return reason.New(reason.MediaBusy, "media bytes in flight are at the budget of %d bytes", h.b.size)
}

// unreserve gives back n of the reserved bytes.
func (h *hold) unreserve(n int64) {
	if h.b == nil || n <= 0 {
		return
	}
	n = min(n, h.n)
	h.n -= n
	h.b.held.Add(-n)
	h.b.sem.Release(n)
}

// release gives back everything; the hold may be reused.
func (h *hold) release() { h.unreserve(h.n) }
