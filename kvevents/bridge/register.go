package bridge

import (
	"context"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv"
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

// registerDeleteTimeout bounds the delete of a record whose registration was cancelled mid-put.
const registerDeleteTimeout = 2 * time.Second

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
	watch := b.watches[w.WorkerID]
	bs, fromEvents := w.BlockSize, false
	client := &http.Client{Timeout: probeTimeout}
	for bs == 0 {
		// The main-attention group's block size from the events wins; the metrics page is asked
		// meanwhile, so an idle engine registers too (its value is corrected by the first event).
		if n := watch.value(); n > 0 {
			bs, fromEvents = n, true
			log.Info("read block size from the engine's KV events (main-attention group)", zap.Int("block_size", bs))
			break
		}
		n, err := ProbeBlockSize(ctx, client, w.MetricsURL)
		if err == nil {
			bs = n
			log.Info("read block size from engine metrics", zap.Int("block_size", bs), zap.String("metrics_url", w.MetricsURL))
			break
		}
		log.Warn("reading block size from engine metrics; retrying", zap.String("metrics_url", w.MetricsURL), zap.Error(err), zap.Duration("wait", wait))
		if !sleepOrLearn(ctx, &wait, watch) {
			return
		}
	}
	wait = b.cfg.RegisterRetry
	var bucket jetstream.KeyValue
	for {
		var err error
		bucket, err = registry.OpenBucket(ctx, js)
		if err == nil {
			break
		}
		log.Warn("opening worker registry; retrying", zap.Error(err), zap.Duration("wait", wait))
		if !sleep() {
			return
		}
	}
	lr := &liveRecord{w: w, bs: bs}
	if w.Engine == kv.EngineVLLM {
		lr.adapters, _ = b.probeAdapters(ctx, log, client, w)
	}
	p, err := registry.NewPublisher(bucket, lr.record(), &registry.PublisherConfig{Interval: b.cfg.Heartbeat, Logger: log})
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
		if ctx.Err() != nil {
			// Stopped while the first put was in flight: the put may still have been stored
			// (its ack was what the cancel cut short), and this publisher never reaches Stop's
			// list, so delete the key here or the record outlives the bridge until its TTL.
			dctx, cancel := context.WithTimeout(context.Background(), registerDeleteTimeout)
			if err := bucket.Delete(dctx, w.WorkerID); err != nil {
				log.Warn("deleting worker record after a cancelled registration", zap.Error(err))
			}
			cancel()
			return
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
	log.Info("worker registered", zap.Int("block_size", bs), zap.Int("dp_size", w.DPSize), zap.Int("adapters", len(lr.adapters)))
	if w.Engine == kv.EngineVLLM && b.cfg.AdaptersRefresh > 0 {
		b.wg.Add(1) // this goroutine is counted: Stop's Wait cannot have returned
		go func() {
			defer b.wg.Done()
			b.refreshAdapters(ctx, log, client, p, w, lr)
		}()
	}
	if !fromEvents {
		b.checkBlockSize(ctx, log, p, w, bs, watch, lr)
	}
}

// checkBlockSize waits for the main-attention block size of the worker's events and compares it with
// the registered one. A size read from cache_config_info is replaced (hybrid models: the metrics name
// another group's or the requested size); a configured one is kept and the disagreement logged, since
// the router then skips every event as block_size_mismatch.
func (b *Bridge) checkBlockSize(ctx context.Context, log *zap.Logger, p *registry.Publisher, w WorkerConfig, bs int, watch *blockSizeWatch, lr *liveRecord) {
	select {
	case <-ctx.Done():
		return
	case <-watch.learned:
	}
	n := watch.value()
	switch {
	case n == bs:
	case w.BlockSize != 0:
		log.Error("configured block_size disagrees with the main-attention block size of the engine's KV events; the router skips them",
			zap.Int("block_size", bs), zap.Int("events_block_size", n))
	default:
		if err := p.Update(ctx, lr.setBlockSize(n)); err != nil {
			log.Error("re-registering worker with the events' block size", zap.Int("block_size", n), zap.Error(err))
			return
		}
		log.Warn("engine metrics named another block size than the main-attention group's KV events (hybrid model); re-registered",
			zap.Int("metrics_block_size", bs), zap.Int("block_size", n))
	}
}

// sleepOrLearn waits *wait (then doubles it, up to maxRegisterRetry) or until the watch learns the
// block size; false when ctx is done.
func sleepOrLearn(ctx context.Context, wait *time.Duration, watch *blockSizeWatch) bool {
	t := time.NewTimer(*wait)
	defer t.Stop()
	*wait = min(2**wait, maxRegisterRetry)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-watch.learned:
	}
	return true
}
