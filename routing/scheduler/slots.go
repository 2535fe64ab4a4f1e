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
//   - Running requests are counted when one of them finishes (Done): concurrency only falls at a
//     Done, so its peaks are seen there. The count leaves out a request whose first byte was the
//     event just before the Done: the engine freed the finishing request's slot when it sent the
//     last byte and may have given it to the next request, whose first byte can reach the router
//     before the end of the response that made room for it.
//   - The worker's high-water mark H is the highest such count (this epoch or the previous one):
//     its limit is at least H.
//   - A limit L = H is confirmed when a running request finishes with H counted and others
//     starting: the worker sat at its highest concurrency with a queue and admitted nobody until
//     a slot freed (with a limit above H a starting request would have got its first byte and
//     raised H first, except when it was still prefilling, which the router cannot see: hence the
//     next two rules).
//   - A limit is only confirmed from 2 running up: one decoding and one prefilling request look
//     like a full single slot, and that state is common on any worker with moderate load.
//   - A confirmed limit that is exceeded (more than L counted at a Done) is dropped at once: a
//     limit the worker went over is not its limit.
//   - Only a request seen running — another event on the worker (a Begin, a first byte, a Done)
//     came between its first byte and its Done — counts: a response that is not streamed has its
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
	// seq counts the events on the worker (begin, firstByte, done, leave, join); lastFB is the
	// number of the last firstByte event.
	seq, lastFB uint64
}

// begin counts one request starting (as a request joining from another worker before its first byte).
func (l *slotLearner) begin() { l.join(false) }

// firstByte moves one request from starting to running and returns the event's sequence number,
// which the request's done passes back.
func (l *slotLearner) firstByte() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starting--
	l.running++
	l.seq++
	l.lastFB = l.seq
	return l.seq
}

// done ends one request, running when it had its first byte (event fbSeq), else starting. A
// request seen running (an event since fbSeq) counts the running requests (less one whose first
// byte was the last event), raises the high-water mark, drops a limit the count exceeds, and
// confirms the count as the limit when it is the high-water mark, at least minLearned, and
// requests are starting.
func (l *slotLearner) done(running bool, fbSeq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if running {
		if l.seq != fbSeq {
			n := l.running
			if l.lastFB == l.seq {
				n--
			}
			l.curH = max(l.curH, n)
			if lim := max(l.curL, l.prevL); lim > 0 && n > lim {
				l.curL, l.prevL = 0, 0
			}
			if l.starting > 0 && n >= minLearned && n >= max(l.curH, l.prevH) {
				l.curL = n
			}
		}
		l.running--
	} else {
		l.starting--
	}
	l.seq++
	if l.dones++; l.dones >= learnEpoch {
		l.prevL, l.curL, l.prevH, l.curH, l.dones = l.curL, 0, l.curH, 0, 0
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
	l := t.lookup(w)
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
