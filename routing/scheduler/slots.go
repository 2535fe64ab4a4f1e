package scheduler

import (
	"sync"

	"github.com/kvroute/kvroute/kv/index"
)

// Learned running limits (ttft2, issue 26). An engine runs at most max_running sequences at once
// (vLLM max_num_seqs, SGLang max_running_requests); a request beyond it waits for a running one to
// finish. ttft2 prices that wait (queue_wait_tokens per waiting sequence) only when it knows the
// limit; without `max_running` configured it learns one from what the router sees of its own
// requests on each worker: a request is *starting* from Begin to its first response byte (waiting
// for a slot, or prefilling) and *running* (decoding) from the first byte to Done.
//
//   - The worker's high-water mark H is the most requests seen running at once (this epoch or the
//     previous one): its limit is at least H.
//   - A limit L = H is confirmed when a running request finishes while H are running and others
//     are starting: the worker sat at its highest concurrency with a queue and admitted nobody
//     until a slot freed (with a limit above H a starting request would have got its first byte
//     and raised H first, except when it was still prefilling, which the router cannot see: hence
//     the next two rules).
//   - A limit is only confirmed from 2 running up: one decoding and one prefilling request look
//     like a full single slot, and that state is common on any worker with moderate load.
//   - A confirmed limit that is exceeded (a first byte with more than L running) is dropped at
//     once: a limit the worker went over is not its limit.
//   - Only a request seen running — another event on the worker (a Begin, a first byte, a Done)
//     came between its first byte and its Done — confirms: a response that is not streamed has its
//     first byte at its end and is never seen running.
//
// It never learns on an idle worker (no request starting at the Done) and is 0 — unknown, no wait
// term — until the first confirmation. Epochs of learnEpoch Dones on the worker age it: a limit
// and a high-water mark are kept for the epoch they were seen in and the next one, so a worker
// restarted with a smaller limit is relearned (or unknown) within two epochs, and a quiet period
// (never full for two epochs) returns to unknown. Tracker.Forget resets it at once.

// learnEpoch is the number of finished requests on a worker after which a new epoch starts (the
// previous epoch's limit and high-water mark are kept for one more epoch).
const learnEpoch = 512

// minLearned is the smallest limit learned (a full single slot looks like one decoding and one
// prefilling request).
const minLearned = 2

// slotLearner is one worker's starting and running counts (this router's own requests) and its
// learned running limit. Lock order: docs/LOCKS.md (Handle.mu → slotLearner.mu, a leaf).
type slotLearner struct {
	mu                sync.Mutex
	starting, running int64
	// curL and prevL are the limits confirmed this epoch and in the previous one (0: none);
	// curH and prevH the high-water marks of running; dones counts this epoch's Dones.
	curL, prevL, curH, prevH int64
	dones                    int
	// seq counts the events on the worker (begin, firstByte, done, leave, join).
	seq uint64
}

// begin counts one request starting.
func (l *slotLearner) begin() {
	l.mu.Lock()
	l.starting++
	l.seq++
	l.mu.Unlock()
}

// firstByte moves one request from starting to running, raises the high-water mark, drops an
// exceeded limit, and returns the event's sequence number, which the request's done passes back.
func (l *slotLearner) firstByte() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starting--
	l.running++
	l.seq++
	l.curH = max(l.curH, l.running)
	if lim := max(l.curL, l.prevL); lim > 0 && l.running > lim {
		l.curL, l.prevL = 0, 0
	}
	return l.seq
}

// done ends one request, running when it had its first byte (event fbSeq), else starting. A
// request seen running (an event since fbSeq) that ends with the worker at its high-water mark
// (at least minLearned) while requests are starting confirms that mark as the limit.
func (l *slotLearner) done(running bool, fbSeq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if running {
		if l.starting > 0 && l.seq != fbSeq && l.running >= minLearned && l.running >= max(l.curH, l.prevH) {
			l.curL = l.running
		}
		l.running--
	} else {
		l.starting--
	}
	l.seq++
	if l.dones++; l.dones >= learnEpoch {
		l.prevL, l.curL, l.prevH, l.curH, l.dones = l.curL, 0, l.curH, l.running, 0
	}
}

// leave removes one request (Handle.Move to another worker) without learning: it did not finish.
func (l *slotLearner) leave(running bool) {
	l.mu.Lock()
	if running {
		l.running--
	} else {
		l.starting--
	}
	l.seq++
	l.mu.Unlock()
}

// join adds one request moved from another worker.
func (l *slotLearner) join(running bool) {
	l.mu.Lock()
	if running {
		l.running++
		l.curH = max(l.curH, l.running)
	} else {
		l.starting++
	}
	l.seq++
	l.mu.Unlock()
}

// limit returns the learned running limit, 0 while unknown.
func (l *slotLearner) limit() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.curL, l.prevL)
}

// LearnedMaxRunning returns worker w's learned running limit (0: unknown, or w never seen): the
// most of this router's requests seen running at once on w (first byte received, not done),
// confirmed when one of them finished at that count while others had not produced a first byte,
// and not exceeded since; kept for the epoch of learnEpoch finished requests it was confirmed in
// and the next (slots.go).
func (t *Tracker) LearnedMaxRunning(w index.WorkerKey) int64 {
	t.mu.RLock()
	l := t.loads[w]
	t.mu.RUnlock()
	if l == nil {
		return 0
	}
	return l.slots.limit()
}

// applyLearnedLimit fills the queue terms from a learned running limit lim (ttft2 without
// max_running): waiting_sequences = max(active_requests + 1 − lim, 0), queue_tokens =
// waiting_sequences · queue_wait_tokens (0: DefaultQueueWaitTokens). lim 0 (unknown) leaves them 0.
func (t *Terms) applyLearnedLimit(lim int64, load Load, queueWait float64) {
	if lim <= 0 {
		return
	}
	if queueWait == 0 {
		queueWait = DefaultQueueWaitTokens
	}
	t.LearnedMaxRunning = lim
	t.WaitingSequences = max(load.Requests+1-lim, 0)
	t.QueueTokens = float64(t.WaitingSequences) * queueWait
}
