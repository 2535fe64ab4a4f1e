package sim

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
)

// ClaimWorkerIDWait is ClaimWorkerID for a simulator started with or before its NATS cluster (a
// machine booting both): while the registry cannot be reached (NATS not connected yet, JetStream
// still electing) it retries, doubling the wait from 250 ms up to 5 s and logging the first failure,
// instead of failing. A worker id claimed by a live process is refused at once (ErrWorkerIDInUse);
// ctx ends the wait.
func ClaimWorkerIDWait(ctx context.Context, nc *nats.Conn, id string, logger *zap.Logger) error {
	if logger == nil {
		logger = zap.NewNop()
	}
	wait, logged := 250*time.Millisecond, false
	for {
		err := claimOnce(ctx, nc, id)
		if err == nil || errors.Is(err, registry.ErrWorkerIDInUse) || ctx.Err() != nil {
			return err
		}
		if !logged {
			logger.Warn("worker registry not reachable yet; waiting for NATS", zap.Error(err))
			logged = true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// claimOnce is one ClaimWorkerID attempt, bounded to 5 s.
func claimOnce(ctx context.Context, nc *nats.Conn, id string) error {
	if !nc.IsConnected() {
		return errors.New("NATS not connected yet")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return ClaimWorkerID(ctx, nc, id)
}
