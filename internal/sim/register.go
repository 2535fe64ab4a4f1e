package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// Registration is the simulator's worker record in the kvroute registry: written at Start,
// heartbeated every 10 s, deleted at Close.
type Registration struct {
	nc    *nats.Conn
	owned bool // Close closes nc
	pub   *registry.Publisher
	s     *Server
}

// Register connects to natsURL and publishes the worker record for s, reachable at endpoint.
func Register(ctx context.Context, natsURL, endpoint string, s *Server, logger *zap.Logger) (*Registration, error) {
	nc, err := natsutil.Connect(natsURL, &natsutil.ConnectConfig{Name: "kvroute-sim " + s.cfg.WorkerID, Logger: logger})
	if err != nil {
		return nil, err
	}
	r, err := RegisterConn(ctx, nc, endpoint, s, logger)
	if err != nil {
		nc.Close()
		return nil, err
	}
	r.owned = true
	return r, nil
}

// Record returns the worker record s publishes when reachable at endpoint: engine vllm, its block
// size, dp_size 1, its contract and features.
func (s *Server) Record(endpoint string) registry.Worker {
	return registry.Worker{
		WorkerID: s.cfg.WorkerID, Endpoint: endpoint, Model: s.cfg.Model, Engine: kv.EngineVLLM,
		EngineVersion: "kvroute-sim", BlockSize: s.cfg.BlockSize, DPSize: 1,
		Features: s.cfg.Features, Contract: s.cfg.Contract, Adapters: s.Adapters(),
	}
}

// RegisterConn is Register over an open connection, which Close leaves open. ctx bounds the setup
// only: the heartbeat keeps the record alive until Close, even after ctx ends.
func RegisterConn(ctx context.Context, nc *nats.Conn, endpoint string, s *Server, logger *zap.Logger) (*Registration, error) {
	kv, err := openRegistry(ctx, nc)
	if err != nil {
		return nil, err
	}
	pub, err := registry.NewPublisher(kv, s.Record(endpoint), &registry.PublisherConfig{Logger: logger})
	if err != nil {
		return nil, err
	}
	// The heartbeat must outlive a setup deadline (a record without heartbeats expires in 30 s).
	if err := pub.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	// An adapter loaded or unloaded at run time is in the record at once, as a bridge's next
	// /v1/models refresh would put it there.
	s.loras.mu.Lock()
	s.loras.onChange = func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := pub.Update(uctx, s.Record(endpoint)); err != nil && logger != nil {
			logger.Warn("updating the worker record's adapters", zap.Error(err))
		}
	}
	s.loras.mu.Unlock()
	return &Registration{nc: nc, pub: pub, s: s}, nil
}

// Close deletes the worker record and closes the connection when Register opened it.
func (r *Registration) Close(ctx context.Context) error {
	r.s.loras.mu.Lock()
	r.s.loras.onChange = nil // a record deleted is not written again by a later load
	r.s.loras.mu.Unlock()
	err := r.pub.Stop(ctx)
	if r.owned {
		r.nc.Close()
	}
	return err
}

// ClaimWorkerID refuses a worker id that a live process publishes already (registry.CheckClaim,
// waiting up to registry.ClaimWindow when the registry holds a record of the id from another
// process). Call it before anything is announced for the worker: a simulator's event publisher
// resets the worker's blocks on every router as it starts.
func ClaimWorkerID(ctx context.Context, nc *nats.Conn, id string) error {
	kv, err := openRegistry(ctx, nc)
	if err != nil {
		return err
	}
	if err := registry.CheckClaim(ctx, kv, id, 0); err != nil {
		return fmt.Errorf("starting worker %s: %w", id, err)
	}
	return nil
}

// openRegistry opens the worker registry bucket over nc.
func openRegistry(ctx context.Context, nc *nats.Conn) (jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	return registry.OpenBucket(ctx, js)
}
