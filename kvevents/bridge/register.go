package bridge

import (
	"context"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// maxRegisterRetry caps the backoff between registration attempts.
const maxRegisterRetry = 30 * time.Second

// probeTimeout bounds one GET of the engine's metrics page.
const probeTimeout = 5 * time.Second

// Record returns the registry record of w (DESIGN.md §2.1) with the given block size.
func (w *WorkerConfig) Record(blockSize int) registry.Worker {
	return registry.Worker{
		WorkerID: w.WorkerID, Endpoint: w.Endpoint, Model: w.Model, Engine: w.Engine,
		EngineVersion: w.EngineVersion, BlockSize: blockSize, DPSize: w.DPSize,
		Features: w.Features, Contract: w.Contract,
	}
}

// register writes the worker's registry record and heartbeats it until ctx is done: it first reads
// the block size from the engine's metrics when none is configured, then opens the bucket; each step
// is retried with backoff. The publisher is kept for Stop, which deletes the record.
func (b *Bridge) register(ctx context.Context, js jetstream.JetStream, w WorkerConfig) {
	log := b.log.With(zap.String("worker_id", w.WorkerID))
	defer func() {
		if r := recover(); r != nil {
			log.Error("worker registration panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	wait := b.cfg.RegisterRetry
	sleep := func() bool {
		t := time.NewTimer(wait)
		defer t.Stop()
		wait = min(2*wait, maxRegisterRetry)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	bs := w.BlockSize
	client := &http.Client{Timeout: probeTimeout}
	for bs == 0 {
		n, err := ProbeBlockSize(ctx, client, w.MetricsURL)
		if err == nil {
			bs = n
			log.Info("read block size from engine metrics", zap.Int("block_size", bs), zap.String("metrics_url", w.MetricsURL))
			break
		}
		log.Warn("reading block size from engine metrics; retrying", zap.String("metrics_url", w.MetricsURL), zap.Error(err), zap.Duration("wait", wait))
		if !sleep() {
			return
		}
	}
	wait = b.cfg.RegisterRetry
	var kv jetstream.KeyValue
	for {
		var err error
		kv, err = registry.OpenBucket(ctx, js)
		if err == nil {
			break
		}
		log.Warn("opening worker registry; retrying", zap.Error(err), zap.Duration("wait", wait))
		if !sleep() {
			return
		}
	}
	p, err := registry.NewPublisher(kv, w.Record(bs), &registry.PublisherConfig{Interval: b.cfg.Heartbeat, Logger: log})
	if err != nil {
		log.Error("building worker record", zap.Error(err))
		return
	}
	wait = b.cfg.RegisterRetry
	for {
		err := p.Start(ctx)
		if err == nil {
			break
		}
		log.Warn("registering worker; retrying", zap.Error(err), zap.Duration("wait", wait))
		if !sleep() {
			return
		}
	}
	b.mu.Lock()
	b.publishers = append(b.publishers, p)
	b.registered[w.WorkerID] = true
	b.mu.Unlock()
	log.Info("worker registered", zap.Int("block_size", bs), zap.Int("dp_size", w.DPSize))
}
