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
	"github.com/kvroute/kvroute/internal/tick"
)

// PublisherConfig configures a Publisher. The zero value is not useful; start from
// DefaultPublisherConfig.
type PublisherConfig struct {
	// Interval between heartbeats (record rewrites). Default: HeartbeatInterval (10 s).
	Interval time.Duration
	// Timeout of one put or delete. Default: 5 s.
	Timeout time.Duration
	// Logger for heartbeat failures. Default: a no-op logger.
	Logger *zap.Logger
}

// DefaultPublisherConfig returns the DESIGN.md §2.1 defaults.
func DefaultPublisherConfig() *PublisherConfig {
	return &PublisherConfig{Interval: HeartbeatInterval, Timeout: 5 * time.Second, Logger: zap.NewNop()}
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
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return fmt.Errorf("starting publisher for %s: already started", p.id)
	}
	if err := p.put(ctx); err != nil {
		return err
	}
	hctx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	p.done = make(chan struct{})
	go p.loop(hctx, p.done)
	return nil
}

func (p *Publisher) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	defer func() {
		if r := recover(); r != nil {
			p.cfg.Logger.Error("registry publisher panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	tick.Every(ctx, p.cfg.Interval, func() {
		if err := p.put(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Error("heartbeating worker record", zap.String("worker_id", p.id), zap.Error(err))
		}
	})
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
