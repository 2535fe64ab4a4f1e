package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	zmq "github.com/pebbe/zmq4"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/snapshot"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// Bridge forwards the KV events of one or more workers from ZMQ to NATS and registers them. Create it
// with New, then Start and Stop it once.
type Bridge struct {
	cfg Config
	nc  *nats.Conn
	log *zap.Logger

	// ranks lists each worker's ranks, by worker id; fixed after New.
	ranks map[string][]*rank
	// watches learn each worker's main-attention block size from its events, by worker id.
	watches map[string]*blockSizeWatch

	// mu protects the lifecycle fields below. Lock order: docs/LOCKS.md.
	mu         sync.Mutex
	state      int // 0 new, 1 started, 2 stopped
	zctx       *zmq.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	subs       []*nats.Subscription
	publishers []*registry.Publisher
	registered map[string]bool
}

// New checks cfg and returns a Bridge publishing on nc. It does no I/O. nc is owned by the caller and
// must stay open until Stop returns.
func New(nc *nats.Conn, cfg *Config) (*Bridge, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: no NATS connection", ErrConfig)
	}
	if cfg == nil {
		cfg = DefaultConfig()
	}
	c := cfg.withDefaults()
	if len(c.Workers) == 0 {
		return nil, fmt.Errorf("%w: no workers", ErrConfig)
	}
	b := &Bridge{cfg: c, nc: nc, log: c.Logger, ranks: map[string][]*rank{}, watches: map[string]*blockSizeWatch{}, registered: map[string]bool{}}
	for i := range b.cfg.Workers {
		w := &b.cfg.Workers[i]
		if err := w.Normalize(); err != nil {
			return nil, err
		}
		if _, dup := b.ranks[w.WorkerID]; dup {
			return nil, fmt.Errorf("%w: worker %s listed twice", ErrConfig, w.WorkerID)
		}
		rs := make([]*rank, w.DPSize)
		watch := newBlockSizeWatch()
		b.watches[w.WorkerID] = watch
		for r := range rs {
			sub, _ := RankEndpoint(w.ZMQEndpoint, r) // checked by Normalize
			rep := ""
			if w.ReplayEndpoint != "" {
				rep, _ = RankEndpoint(w.ReplayEndpoint, r)
			}
			rs[r] = &rank{
				b: b, workerID: w.WorkerID, dpRank: r, subEP: sub, replayEP: rep, topic: w.Topic,
				encoding: w.Encoding, subject: wire.EventsSubject(w.WorkerID), resetSub: wire.ResetSubject(w.WorkerID),
				log:  b.log.With(zap.String("worker_id", w.WorkerID), zap.Int("dp_rank", r)),
				reqs: make(chan replayReq), ring: newRing(c.RingBatches, c.RingBytes),
				watch: &rankWatch{w: watch, enc: codec.Encoding(w.Encoding)},
				snaps: make(chan snapReq), set: snapshot.NewSet(w.MaxBlocks), dec: codec.NewDecoder(),
			}
		}
		b.ranks[w.WorkerID] = rs
	}
	return b, nil
}

// Start subscribes to every rank's ZMQ publisher, answers replay requests, and registers the workers
// in the background (retrying until NATS, JetStream and the engine's metrics answer). The bridge runs
// until Stop; ctx only carries values.
func (b *Bridge) Start(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != 0 {
		return errors.New("starting bridge: already started")
	}
	zctx, err := zmq.NewContext()
	if err != nil {
		return fmt.Errorf("starting bridge: creating zmq context: %w", err)
	}
	b.zctx = zctx
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.cancel = cancel
	b.state = 1
	for _, w := range b.cfg.Workers {
		ranks := b.ranks[w.WorkerID]
		for _, rk := range ranks {
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				rk.run(runCtx)
			}()
		}
		sub, err := b.nc.Subscribe(wire.ReplaySubject(w.WorkerID), func(msg *nats.Msg) {
			b.onReplay(runCtx, w.WorkerID, ranks, msg)
		})
		if err != nil {
			b.stopLocked(context.Background())
			return fmt.Errorf("starting bridge: subscribing to %s: %w", wire.ReplaySubject(w.WorkerID), err)
		}
		b.subs = append(b.subs, sub)
		sub, err = b.nc.Subscribe(wire.SnapshotSubject(w.WorkerID), func(msg *nats.Msg) {
			b.onSnapshot(runCtx, w.WorkerID, ranks, msg)
		})
		if err != nil {
			b.stopLocked(context.Background())
			return fmt.Errorf("starting bridge: subscribing to %s: %w", wire.SnapshotSubject(w.WorkerID), err)
		}
		b.subs = append(b.subs, sub)
	}
	if !b.cfg.DisableRegistration {
		js, err := jetstream.New(b.nc)
		if err != nil {
			b.stopLocked(context.Background())
			return fmt.Errorf("starting bridge: opening jetstream: %w", err)
		}
		for _, w := range b.cfg.Workers {
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				b.register(runCtx, js, w)
			}()
		}
	}
	return nil
}

// Stop stops forwarding, deregisters the workers (deleting their registry records, bounded by ctx)
// and releases the ZMQ sockets. It is idempotent; the NATS connection stays open.
func (b *Bridge) Stop(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopLocked(ctx)
}

// stopLocked implements Stop. Lock should be held on entry.
func (b *Bridge) stopLocked(ctx context.Context) error {
	if b.state != 1 {
		b.state = 2
		return nil
	}
	b.state = 2
	var errs []error
	for _, s := range b.subs {
		if err := s.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("unsubscribing %s: %w", s.Subject, err))
		}
	}
	b.cancel()
	b.mu.Unlock() // register goroutines take mu to record their publisher
	b.wg.Wait()
	b.mu.Lock()
	for _, p := range b.publishers {
		if err := p.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := b.zctx.Term(); err != nil {
		errs = append(errs, fmt.Errorf("terminating zmq context: %w", err))
	}
	return errors.Join(errs...)
}

// Stats returns the counters of every worker rank, in config order.
func (b *Bridge) Stats() []RankStats {
	var out []RankStats
	for _, w := range b.cfg.Workers {
		for _, rk := range b.ranks[w.WorkerID] {
			out = append(out, rk.c.snapshot(rk.workerID, rk.dpRank))
		}
	}
	return out
}

// Registered reports whether the worker's registry record was written and is being heartbeated.
func (b *Bridge) Registered(workerID string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.registered[workerID]
}
