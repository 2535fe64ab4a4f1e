package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
)

// WatcherConfig configures a Watcher; nil means DefaultWatcherConfig.
type WatcherConfig struct {
	// TTL after which a record that was not rewritten is dropped locally, independent of the
	// server's own expiry (which sends no notice to watchers). Default: TTL (30 s).
	TTL time.Duration
	// SweepInterval is how often expired records are looked for. Default: TTL/6.
	SweepInterval time.Duration
	// Logger for dropped records. Default: a no-op logger.
	Logger *zap.Logger
	// Now is the clock; tests inject one. Default: time.Now.
	Now func() time.Time
	// ProbeTimeout bounds one readability probe of the bucket (a stream info or a key read) by the
	// sweep. Default: 2 s.
	ProbeTimeout time.Duration
	// Grace is how long the bucket must have been readable again after an outage before a record
	// missing from it counts as expired: publishers re-create their records within it (they
	// retry faster than their heartbeat while the bucket is unavailable). Default: TTL/2.
	Grace time.Duration
	// Accepted reports whether the caller uses a record (e.g. its endpoint is inside the
	// caller's allow-list). The joins, changes and leaves of records it refuses are not logged
	// here: the caller logs the refusal, and an operator must not read "worker registered" for a
	// worker that is never routed to. The record is kept either way. Default: every record.
	Accepted func(Worker) bool
}

// DefaultWatcherConfig returns the DESIGN.md §2.1 defaults.
func DefaultWatcherConfig() *WatcherConfig {
	return &WatcherConfig{TTL: TTL, SweepInterval: TTL / 6, ProbeTimeout: 2 * time.Second, Grace: TTL / 2, Logger: zap.NewNop(), Now: time.Now}
}

// Watcher keeps the live set of worker records of the bucket in memory and notifies subscribers
// when it changes. Snapshot is lock-free (it runs per request); the other methods are safe for
// concurrent use.
type Watcher struct {
	// kv is the bucket; with open (NewWatcherOpen) it is nil until the loop opened it, and only
	// the loop goroutine uses it (KV reads it under mu).
	kv   jetstream.KeyValue
	open func(context.Context) (jetstream.KeyValue, error)
	cfg  WatcherConfig

	// snap is the current sorted live set, replaced (never mutated) on every change.
	snap atomic.Pointer[[]Worker]
	// invalid counts records dropped because they failed validation.
	invalid atomic.Uint64
	// conflicts counts worker ids found claimed by two live processes (claimLocked).
	conflicts atomic.Uint64
	// health is the bucket's readability as the sweep last probed it (health.go); read by
	// Degraded, written by the loop goroutine only.
	health bucketHealth

	// mu guards seen, subs, cancel and done. Lock order: docs/LOCKS.md (a leaf).
	mu     sync.Mutex
	seen   map[string]entry
	subs   map[chan struct{}]struct{}
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{}
}

type entry struct {
	w    Worker
	seen time.Time // the latest put of w's instance
	rev  uint64    // the bucket revision of that put

	// Instances of the record (conflict.go): prev is the instance w replaced (a restart, or a
	// second process); rival the instance of another live process claiming the same worker id,
	// whose records are ignored while it keeps writing (rivalSeen, its latest put) and w's
	// process lives; warned when the conflict was last logged.
	prev      string
	rival     string
	rivalSeen time.Time
	warned    time.Time
}

// NewWatcher returns a stopped Watcher over kv. cfg may be nil.
func NewWatcher(kv jetstream.KeyValue, cfg *WatcherConfig) *Watcher {
	d := DefaultWatcherConfig()
	c := *d
	if cfg != nil {
		c = *cfg
		defaults.Positive(&c.TTL, d.TTL)
		defaults.Positive(&c.SweepInterval, c.TTL/6)
		defaults.Positive(&c.ProbeTimeout, d.ProbeTimeout)
		defaults.Positive(&c.Grace, c.TTL/2)
		c.Logger = cmp.Or(c.Logger, d.Logger)
		if c.Now == nil {
			c.Now = d.Now
		}
	}
	w := &Watcher{kv: kv, cfg: c, seen: map[string]entry{}, subs: map[chan struct{}]struct{}{}, ready: make(chan struct{})}
	empty := []Worker{}
	w.snap.Store(&empty)
	return w
}

// NewWatcherOpen returns a stopped Watcher whose bucket is opened by open when it starts, in the
// background: open is retried (doubling from 250 ms up to 5 s) until it succeeds, and meanwhile
// the registry counts as degraded (NATS late at boot, or its cluster still electing). cfg may be
// nil.
func NewWatcherOpen(open func(context.Context) (jetstream.KeyValue, error), cfg *WatcherConfig) *Watcher {
	w := NewWatcher(nil, cfg)
	w.open = open
	return w
}

// KV returns the bucket, nil while a NewWatcherOpen watcher has not opened it yet.
func (w *Watcher) KV() jetstream.KeyValue {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kv
}

// Start begins watching the bucket; it returns once the watch is set up (at once for a
// NewWatcherOpen watcher, which opens the bucket and watches it in the background). The initial
// records arrive asynchronously; Ready is closed when they have all been applied. The watch runs
// until Stop is called or ctx is done.
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		return fmt.Errorf("starting registry watcher: already started")
	}
	wctx, cancel := context.WithCancel(ctx)
	var kw jetstream.KeyWatcher
	if w.open == nil {
		var err error
		if kw, err = w.kv.WatchAll(wctx); err != nil {
			cancel()
			return fmt.Errorf("watching bucket %s: %w", Bucket, err)
		}
	}
	w.cancel = cancel
	w.done = make(chan struct{})
	go w.loop(wctx, kw, w.done)
	return nil
}

// Ready is closed once the records present at Start have been applied.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Stop ends the watch and waits for its goroutine. Stop is idempotent.
func (w *Watcher) Stop() {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.cancel, w.done = nil, nil
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (w *Watcher) loop(ctx context.Context, kw jetstream.KeyWatcher, done chan struct{}) {
	defer close(done)
	defer func() {
		if r := recover(); r != nil {
			w.cfg.Logger.Error("registry watcher panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	readyOnce := sync.OnceFunc(func() { close(w.ready) })
	defer readyOnce()
	if kw == nil {
		if kw = w.openWatch(ctx); kw == nil {
			return // stopped before the bucket could be opened
		}
	}
	defer func() { _ = kw.Stop() }()
	sweep := time.NewTicker(w.cfg.SweepInterval)
	defer sweep.Stop()
	updates := kw.Updates()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			w.sweep(ctx)
			if updates == nil { // the watch ended: start it again (its initial values re-apply)
				if nkw, err := w.kv.WatchAll(ctx); err == nil {
					kw, updates = nkw, nkw.Updates()
				}
			}
		case e, ok := <-updates:
			if !ok {
				if ctx.Err() != nil {
					return
				}
				// A watch ends without Stop when its consumer cannot be recreated; the records
				// stay (a registry that cannot be read is not a worker that left, DESIGN.md §2.1).
				w.cfg.Logger.Warn("registry watch ended; restarting it", zap.String("bucket", Bucket))
				_ = kw.Stop()
				updates = nil
				continue
			}
			if e == nil { // all initial values delivered
				readyOnce()
				continue
			}
			w.apply(e)
		}
	}
}

// openWatch opens the bucket with w.open and watches it, retrying with backoff; nil when ctx ends
// first. Until it succeeds the registry is degraded.
func (w *Watcher) openWatch(ctx context.Context) jetstream.KeyWatcher {
	backoff := 250 * time.Millisecond
	for {
		kv, err := w.open(ctx)
		var kw jetstream.KeyWatcher
		if err == nil {
			if kw, err = kv.WatchAll(ctx); err == nil {
				w.mu.Lock()
				w.kv = kv
				w.mu.Unlock()
				if w.health.degraded.Load() {
					w.health.degraded.Store(false)
					w.health.readableSince = w.cfg.Now()
					w.cfg.Logger.Info("worker registry opened", zap.String("bucket", Bucket))
				}
				return kw
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		w.unreadable(w.cfg.Now(), err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// apply records one bucket entry.
func (w *Watcher) apply(e jetstream.KeyValueEntry) {
	key := e.Key()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e.Operation() {
	case jetstream.KeyValuePut:
		rec, err := Decode(key, e.Value())
		if err != nil {
			w.invalid.Add(1)
			w.cfg.Logger.Warn("dropping invalid worker record", zap.String("key", key), zap.Error(err))
			if _, ok := w.seen[key]; ok {
				delete(w.seen, key)
				w.publishLocked()
			}
			return
		}
		old, had := w.seen[key]
		now := w.cfg.Now()
		next, use := w.claimLocked(old, had, rec, now)
		if use {
			next.rev = e.Revision()
		}
		w.seen[key] = next
		if !use {
			return // a rival process's record: the one in use stays
		}
		if !had || !sameWorker(old.w, rec) {
			switch {
			case !w.accepted(rec) && (!had || !w.accepted(old.w)):
				// refused by the caller, and not a change of a record it used: not logged
			case !had:
				// joins and leaves are logged at info (issue 15); heartbeats are not
				w.cfg.Logger.Info("worker registered", zap.String("worker_id", rec.WorkerID), zap.String("endpoint", rec.Endpoint),
					zap.String("model", rec.Model), zap.String("engine", rec.Engine), zap.Int("block_size", rec.BlockSize))
			default:
				w.cfg.Logger.Info("worker record changed", zap.String("worker_id", rec.WorkerID), zap.String("endpoint", rec.Endpoint),
					zap.String("model", rec.Model), zap.Int("block_size", rec.BlockSize))
			}
			w.publishLocked()
		}
	default: // delete, purge, or an expiry marker
		if old, ok := w.seen[key]; ok {
			delete(w.seen, key)
			if w.accepted(old.w) {
				w.cfg.Logger.Info("worker left", zap.String("worker_id", key), zap.String("reason", leaveReason(e.Operation())))
			}
			w.publishLocked()
		}
	}
}

// accepted reports whether the caller uses rec (WatcherConfig.Accepted; every record without one).
func (w *Watcher) accepted(rec Worker) bool {
	return w.cfg.Accepted == nil || w.cfg.Accepted(rec)
}

// leaveReason names why a bucket entry removed a worker: "deregistered" (the publisher deleted
// its key on a graceful shutdown), "purged" (an operator purged the key) or "expired" (a server
// expiry marker).
func leaveReason(op jetstream.KeyValueOp) string {
	switch op {
	case jetstream.KeyValueDelete:
		return "deregistered"
	case jetstream.KeyValuePurge:
		return "purged"
	}
	return "expired"
}

// sweep drops the records not rewritten within TTL, on evidence only (DESIGN.md §2.1): it probes
// the bucket first, and while the bucket cannot be read (or was unreadable within Grace) every
// record stays. A stale record is then read from the bucket: a newer revision (a put the watch
// missed) is applied, the same revision or no key drops the worker as expired.
func (w *Watcher) sweep(ctx context.Context) {
	now := w.cfg.Now()
	if !w.probe(ctx, now) || now.Sub(w.health.readableSince) < w.cfg.Grace {
		return
	}
	w.mu.Lock()
	stale := map[string]uint64{}
	for k, e := range w.seen {
		if now.Sub(e.seen) > w.cfg.TTL {
			stale[k] = e.rev
		}
	}
	w.mu.Unlock()
	for k, rev := range stale {
		pctx, cancel := context.WithTimeout(ctx, w.cfg.ProbeTimeout)
		e, err := w.kv.Get(pctx, k)
		cancel()
		switch {
		case err == nil && e.Revision() > rev:
			w.apply(e)       // a put the watch missed
			w.expire(k, rev) // unless it was a rival process's record, not used (claimLocked)
		case err == nil, errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
			w.expire(k, rev)
		default:
			w.unreadable(now, err)
			return
		}
	}
}

// expire drops worker k when its record is still the one of revision rev.
func (w *Watcher) expire(k string, rev uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.seen[k]
	if !ok || e.rev != rev {
		return
	}
	delete(w.seen, k)
	if w.accepted(e.w) {
		w.cfg.Logger.Info("worker left", zap.String("worker_id", k), zap.String("reason", "expired"))
	}
	w.publishLocked()
}

// publishLocked rebuilds the snapshot and wakes subscribers. Lock should be held on entry.
func (w *Watcher) publishLocked() {
	list := make([]Worker, 0, len(w.seen))
	for _, e := range w.seen {
		list = append(list, e.w)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].WorkerID < list[j].WorkerID })
	w.snap.Store(&list)
	for ch := range w.subs {
		select {
		case ch <- struct{}{}:
		default: // a notice is already pending
		}
	}
}

// Snapshot returns the live records sorted by worker id. The slice is shared: do not modify it.
func (w *Watcher) Snapshot() []Worker { return *w.snap.Load() }

// LastSeen returns when the record of worker id was last written (a heartbeat or a change), as
// observed by this watcher; false when it is not live.
func (w *Watcher) LastSeen(id string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.seen[id]
	return e.seen, ok
}

// Invalid returns how many records were dropped because they failed validation.
func (w *Watcher) Invalid() uint64 { return w.invalid.Load() }

// Subscribe returns a channel that receives a value (coalesced) after each change of the live set,
// and a function that ends the subscription.
func (w *Watcher) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.subs[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.subs, ch)
		w.mu.Unlock()
	}
}

func sameWorker(a, b Worker) bool {
	ea, err1 := a.Encode()
	eb, err2 := b.Encode()
	return err1 == nil && err2 == nil && string(ea) == string(eb)
}
