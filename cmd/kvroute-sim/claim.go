package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// claimWorkerID refuses to start a simulator whose worker id a live process publishes already
// (registry.CheckClaim). When the registry holds a record of the id from another process, it waits
// up to registry.ClaimWindow for a heartbeat of it: a restart after a crash starts that much later.
func claimWorkerID(ctx context.Context, nc *nats.Conn, id string, logger *zap.Logger) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("opening JetStream: %w", err)
	}
	kv, err := registry.OpenBucket(ctx, js)
	if err != nil {
		return err
	}
	logger.Debug("checking that no live process publishes the worker id", zap.String("worker_id", id))
	if err := registry.CheckClaim(ctx, kv, id, 0); err != nil {
		return fmt.Errorf("starting worker %s: %w", id, err)
	}
	return nil
}
