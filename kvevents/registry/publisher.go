package registry

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
)

// PublisherConfig configures a Publisher. The zero value is not useful; start from
// DefaultPublisherConfig.
type PublisherConfig struct {
	// Interval between heartbeats (record rewrites). Default: HeartbeatInterval (10 s).
	Interval time.Duration
	// Timeout of one put or delete. Default: 5 s.
	Timeout time.Duration
	// RetryMin is the first wait before a failed put is tried again; it doubles up to Interval.
	// A publisher whose bucket is unavailable so re-creates its record soon after it comes back,
	// within a router's grace period (WatcherConfig.Grace). Default: 500 ms.
	RetryMin time.Duration
	// Logger for heartbeat failures. Default: a no-op logger.
	Logger *zap.Logger
}

// DefaultPublisherConfig returns the DESIGN.md §2.1 defaults.
func DefaultPublisherConfig() *PublisherConfig {
	return &PublisherConfig{Interval: HeartbeatInterval, Timeout: 5 * time.Second, RetryMin: 500 * time.Millisecond, Logger: zap.NewNop()}
}

// Publisher keeps one worker's record in the bucket: it writes the record on Start, rewrites it
// every Interval (the bucket forgets records after TTL), and deletes the key on Stop.
// Its methods are safe for concurrent use.
type Publisher struct {
	kv       jetstream.KeyValue
	cfg      PublisherConfig
	id       string
	instance string // the records' Instance

	recMu  sync.Mutex // guards record (Update runs beside the heartbeat)
	record []byte

	// mu guards cancel and done (the heartbeat goroutine's lifetime). Lock order: docs/LOCKS.md.
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewPublisher validates w and returns a Publisher for it. cfg may be nil (defaults). An empty
// w.Instance gets a random one: the publisher's records carry it, and Update keeps it.
func NewPublisher(kv jetstream.KeyValue, w Worker, cfg *PublisherConfig) (*Publisher, error) {
	if w.Instance == "" {
		w.Instance = newInstance()
	}
	if err := w.Normalize(); err != nil {
		return nil, err
	}
	rec, err := w.Encode()
	if err != nil {
		return nil, err
	}
	d := DefaultPublisherConfig()
	c := *d
	if cfg != nil {
		c = *cfg
		defaults.Positive(&c.Interval, d.Interval)
		defaults.Positive(&c.Timeout, d.Timeout)
		defaults.Positive(&c.RetryMin, d.RetryMin)
		c.Logger = cmp.Or(c.Logger, d.Logger)
	}
	return &Publisher{kv: kv, cfg: c, record: rec, id: w.WorkerID, instance: w.Instance}, nil
}

// newInstance returns 16 random hex digits.
func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Start writes the record once (returning its error) and then heartbeats in the background until
// Stop is called or ctx is done.
func (p *Publisher) Start(ctx context.Context) error {
	return p.start(ctx, true)
}

// StartBackground is Start without the first write in the caller's goroutine: the heartbeat
// writes the record at once and retries (RetryMin, doubling up to Interval) until the bucket takes
// it, so a publisher started before NATS is reachable registers when it is.
func (p *Publisher) StartBackground(ctx context.Context) error {
	return p.start(ctx, false)
}

func (p *Publisher) start(ctx context.Context, putFirst bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return fmt.Errorf("starting publisher for %s: already started", p.id)
	}
	first := time.Duration(0)
	if putFirst {
		if err := p.put(ctx); err != nil {
			return err
		}
		first = p.cfg.Interval
	}
	hctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	p.done = make(chan struct{})
	go p.loop(hctx, first, p.done)
	return nil
}

// loop rewrites the record every Interval; after a failed put it retries sooner (RetryMin,
// doubling up to Interval), logging the first failure at warn and the recovery at info.
func (p *Publisher) loop(ctx context.Context, first time.Duration, done chan struct{}) {
	defer close(done)
	defer func() {
		if r := recover(); r != nil {
			p.cfg.Logger.Error("registry publisher panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	t := time.NewTimer(first)
	defer t.Stop()
	failing, wait := false, time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := p.put(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if failing {
				p.cfg.Logger.Info("worker record written again", zap.String("worker_id", p.id))
			}
			failing, wait = false, p.cfg.Interval
		default:
			if !failing {
				p.cfg.Logger.Warn("heartbeating worker record; retrying", zap.String("worker_id", p.id), zap.Error(err))
				wait = p.cfg.RetryMin
			} else {
				wait = min(2*wait, p.cfg.Interval)
			}
			failing = true
		}
		t.Reset(wait)
	}
}

// Update replaces the record (same worker id) and, when the Publisher is started, writes it at once;
// later heartbeats write the new record. The error is the validation's or the put's.
func (p *Publisher) Update(ctx context.Context, w Worker) error {
	if err := w.Normalize(); err != nil {
		return err
	}
	if w.WorkerID != p.id {
		return fmt.Errorf("updating worker record %s: record of %s", p.id, w.WorkerID)
	}
	if w.Instance == "" {
		w.Instance = p.instance
	}
	rec, err := w.Encode()
	if err != nil {
		return err
	}
	p.recMu.Lock()
	p.record = rec
	p.recMu.Unlock()
	p.mu.Lock()
	started := p.cancel != nil
	p.mu.Unlock()
	if !started {
		return nil
	}
	return p.put(ctx)
}

func (p *Publisher) put(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	p.recMu.Lock()
	rec := p.record
	p.recMu.Unlock()
	if _, err := p.kv.Put(ctx, p.id, rec); err != nil {
		return fmt.Errorf("putting worker record %s: %w", p.id, err)
	}
	return nil
}

// Stop ends the heartbeat and deletes the worker's key, so routers drop the worker at once instead
// of after TTL. ctx bounds the delete. Stop is idempotent.
func (p *Publisher) Stop(ctx context.Context) error {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel, p.done = nil, nil
	p.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	ctx, c := context.WithTimeout(ctx, p.cfg.Timeout)
	defer c()
	if err := p.kv.Delete(ctx, p.id); err != nil {
		return fmt.Errorf("deleting worker record %s: %w", p.id, err)
	}
	return nil
}
