package subscriber

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// NATS subjects of DESIGN.md §2.2.
const ()

// ErrStopped is returned by Start after Stop, and by Start called twice.
var ErrStopped = errors.New("subscriber stopped or already started")

// Subscriber applies the workers' KV events to an index. Create it with New, then Start; Stop ends
// it. SetWorkers, SetOnStored, Stats and Worker are safe for concurrent use at any time.
//
// Lock order: docs/LOCKS.md (setMu, then mu; the index is never called under either).
type Subscriber struct {
	cfg      Config
	nc       *nats.Conn
	ix       *index.Index
	log      *zap.Logger
	onStored atomic.Pointer[StoredFunc]
	// pads is the model's placeholder ids, image pad << 32 | video pad; replaced by SetPads (a
	// config reload that changes the model), read by every normalizer build (shard.normalizer).
	pads atomic.Uint64

	// totals counts every result of every worker (lock-free, hot path).
	totals [numResults]atomic.Uint64

	// mu protects views, pending, started, stopped and the WaitGroup's Add (no goroutine is
	// started once stopped is set).
	mu      sync.RWMutex
	views   map[string]*workerView
	pending []registry.Worker // the worker set given before Start
	hasSet  bool
	started bool
	stopped bool
	wg      sync.WaitGroup

	// setMu serializes SetWorkers, so every shard sees the sets in the same order.
	setMu sync.Mutex

	// set at Start, read-only afterwards
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan *nats.Msg
	subs   []*nats.Subscription
	shards []*shard
}

// New returns a stopped Subscriber over nc and ix. cfg may be nil (DefaultConfig).
func New(cfg *Config, nc *nats.Conn, ix *index.Index) (*Subscriber, error) {
	if nc == nil || ix == nil {
		return nil, errors.New("creating kv event subscriber: nats connection and index are required")
	}
	c := withDefaults(cfg)
	s := &Subscriber{cfg: c, nc: nc, ix: ix, log: c.Logger, views: map[string]*workerView{}}
	if c.OnStored != nil {
		f := c.OnStored
		s.onStored.Store(&f)
	}
	s.pads.Store(packPads(c.ImagePad, c.VideoPad))
	return s, nil
}

// SetPads replaces the model's placeholder token ids (Config.ImagePad, Config.VideoPad; both 0
// means the defaults). The subscriber outlives a config reload, and a reload may change the model:
// every stream's normalizer is rebuilt with the new ids before its next batch (as on an encoding
// change, which restarts its salt memory). Blocks already in the index keep their local hashes.
// Safe for concurrent use.
func (s *Subscriber) SetPads(imagePad, videoPad uint32) {
	if imagePad == 0 && videoPad == 0 {
		imagePad, videoPad = DefaultImagePad, DefaultVideoPad
	}
	s.pads.Store(packPads(imagePad, videoPad))
}

// Pads returns the placeholder token ids in use (image pad, video pad).
func (s *Subscriber) Pads() (imagePad, videoPad uint32) {
	p := s.pads.Load()
	return uint32(p >> 32), uint32(p)
}

func packPads(imagePad, videoPad uint32) uint64 { return uint64(imagePad)<<32 | uint64(videoPad) }

// SetOnStored replaces the layout verification callback (nil turns it off).
func (s *Subscriber) SetOnStored(f StoredFunc) {
	if f == nil {
		s.onStored.Store(nil)
		return
	}
	s.onStored.Store(&f)
}

// Start subscribes to kvroute.events.* and kvroute.ctl.*.reset and starts the dispatcher and the
// shards; the worker set given so far (SetWorkers) is applied, which sends the registration replay
// requests. The goroutines run until Stop or until ctx is done. Start returns an error wrapping
// ErrStopped when called twice or after Stop, or the subscription error.
func (s *Subscriber) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return fmt.Errorf("starting kv event subscriber: %w", ErrStopped)
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.ch = make(chan *nats.Msg, s.cfg.QueueLength)
	for _, subj := range []string{wire.AllEvents, wire.AllResets} {
		sub, err := s.nc.ChanSubscribe(subj, s.ch)
		if err != nil {
			for _, x := range s.subs {
				_ = x.Unsubscribe()
			}
			s.subs = nil
			s.cancel()
			return fmt.Errorf("subscribing to %s: %w", subj, err)
		}
		s.subs = append(s.subs, sub)
	}
	// The SUBs go out asynchronously: a round trip makes the server hold them before the
	// registration replays are requested, so the batches a bridge replays (and any published
	// after Start returns) reach this subscriber. Not an error when the connection is down: the
	// subscriptions are sent again on reconnect.
	if s.nc.IsConnected() { // not connected yet (NATS late at boot): no round trip to wait for
		_ = s.nc.FlushTimeout(2 * time.Second)
	}
	s.shards = make([]*shard, s.cfg.Shards)
	for i := range s.shards {
		s.shards[i] = newShard(s)
	}
	s.started = true
	for _, sh := range s.shards {
		s.goLocked(sh.run)
	}
	s.goLocked(s.dispatch)
	if s.hasSet {
		ws := s.pending
		s.pending = nil
		for _, sh := range s.shards {
			sh.in <- item{kind: itemWorkers, workers: ws} // queues are empty: cannot block
		}
	}
	return nil
}

// goLocked starts a tracked goroutine that recovers from panics. s.mu must be held on entry.
func (s *Subscriber) goLocked(f func()) bool {
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			if r := recover(); r != nil {
				s.log.Error("kv event subscriber goroutine panicked", zap.Any("panic", r), zap.Stack("stack"))
			}
		}()
		f()
	}()
	return true
}

// goTracked starts a tracked goroutine unless the subscriber is stopping.
func (s *Subscriber) goTracked(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.goLocked(f)
}

// Stop unsubscribes, stops the dispatcher, the shards and the replay requests, and waits for them.
// The index keeps what was applied. Stop is idempotent.
func (s *Subscriber) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	subs, cancel := s.subs, s.cancel
	s.mu.Unlock()
	for _, sub := range subs {
		_ = sub.Unsubscribe()
	}
	if cancel != nil {
		cancel()
	}
	s.wg.Wait()
}

// SetWorkers replaces the worker set: the registry's live records merged with static ones
// (registry.Merge). Records are expected normalized (registry.Worker.Normalize). Workers not in the
// previous set get registration replays, workers no longer in it are purged from the index (see the
// package doc). Before Start the set is kept and applied by Start. It blocks while the shards' queues
// are full.
func (s *Subscriber) SetWorkers(ws []registry.Worker) {
	list := append([]registry.Worker(nil), ws...)
	s.setMu.Lock()
	defer s.setMu.Unlock()
	s.mu.Lock()
	if !s.started {
		s.pending, s.hasSet = list, true
		s.mu.Unlock()
		return
	}
	shards, ctx := s.shards, s.ctx
	s.mu.Unlock()
	for _, sh := range shards {
		if !sh.post(ctx, item{kind: itemWorkers, workers: list}) {
			return
		}
	}
}

// dispatch hands each subscription message to the shard of its worker.
func (s *Subscriber) dispatch() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case m := <-s.ch:
			it, id, ok := classify(m)
			if !ok {
				s.count(nil, "", rBadHeader, 1)
				continue
			}
			if !s.shardFor(id).post(s.ctx, it) {
				return
			}
		}
	}
}

// classify reads the worker id and message kind from the subject.
func classify(m *nats.Msg) (item, string, bool) {
	if id, ok := wire.EventsWorker(m.Subject); ok {
		return item{kind: itemEvent, id: id, msg: m}, id, registry.ValidWorkerID(id)
	}
	if id, ok := wire.ResetWorker(m.Subject); ok {
		return item{kind: itemReset, id: id, msg: m}, id, registry.ValidWorkerID(id)
	}
	return item{}, "", false
}

func (s *Subscriber) shardFor(id string) *shard {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return s.shards[h.Sum32()%uint32(len(s.shards))]
}
