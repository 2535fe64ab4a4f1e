package registry

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// bucketHealth is the registry bucket's readability as a Watcher's sweep probes it. A bucket
// whose stream has no leader (it takes no write) (the server holding a one-replica bucket is gone, a cluster that
// lost its quorum, JetStream disabled) does not answer; the watcher then keeps its records and
// says the registry is degraded (DESIGN.md §2.1).
type bucketHealth struct {
	degraded atomic.Bool
	// outages counts the times the bucket became unreadable.
	outages atomic.Uint64
	// readableSince is when the bucket was last found readable after being unreadable (zero: it
	// never was unreadable). Owned by the loop goroutine.
	readableSince time.Time
	// lastErr is the error last logged for this outage ("" when readable). Owned by the loop
	// goroutine.
	lastErr string
}

// probe reads the bucket's status; it returns whether the bucket is readable now.
func (w *Watcher) probe(ctx context.Context, now time.Time) bool {
	pctx, cancel := context.WithTimeout(ctx, w.cfg.ProbeTimeout)
	defer cancel()
	st, err := w.kv.Status(pctx)
	if err == nil {
		err = leaderless(st)
	}
	if err != nil {
		if ctx.Err() == nil {
			w.unreadable(now, err)
		}
		return false
	}
	if w.health.degraded.CompareAndSwap(true, false) {
		w.health.readableSince = now
		w.cfg.Logger.Info("worker registry readable again; records missing from it expire after the grace period",
			zap.String("bucket", Bucket), zap.Duration("grace", w.cfg.Grace))
	}
	return true
}

// errNoLeader is the probe's error for a replicated bucket whose stream has no leader.
var errNoLeader = errors.New("the bucket's stream has no leader")

// leaderless returns errNoLeader when st is a replicated bucket's status without a stream leader:
// a cluster that lost its quorum still answers the stream info and serves direct reads from a
// replica, but takes no write, so publishers cannot heartbeat and a record missing from the
// replica proves nothing. nil for a single server's bucket (its leader is the server).
func leaderless(st jetstream.KeyValueStatus) error {
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil || bs.StreamInfo().Cluster == nil {
		return nil
	}
	if bs.StreamInfo().Cluster.Leader == "" {
		return errNoLeader
	}
	return nil
}

// unreadable marks the registry degraded: logged when the outage starts and again whenever its
// cause changes (NATS not connected yet, then JetStream not enabled: an operator must see the
// second, not only the first), not at every retry.
func (w *Watcher) unreadable(now time.Time, err error) {
	w.health.readableSince = now // an outage restarts the grace period
	msg := "<nil>"
	if err != nil {
		msg = err.Error()
	}
	started := w.health.degraded.CompareAndSwap(false, true)
	if !started && msg == w.health.lastErr {
		return
	}
	w.health.lastErr = msg
	w.mu.Lock()
	n := len(w.seen)
	w.mu.Unlock()
	if started {
		w.health.outages.Add(1)
		w.cfg.Logger.Warn("worker registry unavailable; keeping the last known workers until it can be read",
			zap.String("bucket", Bucket), zap.Int("workers", n), zap.Error(err))
		return
	}
	w.cfg.Logger.Warn("worker registry still unavailable, for another reason now",
		zap.String("bucket", Bucket), zap.Int("workers", n), zap.Error(err))
}

// Degraded reports whether the registry bucket could not be read at the last probe (the watcher
// then keeps the last known records).
func (w *Watcher) Degraded() bool { return w.health.degraded.Load() }

// Outages returns how many times the registry bucket became unreadable.
func (w *Watcher) Outages() uint64 { return w.health.outages.Load() }
