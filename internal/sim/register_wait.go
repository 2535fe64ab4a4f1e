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
	wait, logged := 250*time.Millisecond, ""
	for {
		err := claimOnce(ctx, nc, id)
		if err == nil || errors.Is(err, registry.ErrWorkerIDInUse) || ctx.Err() != nil {
			return err
		}
		if msg := err.Error(); msg != logged {
			// logged again when the cause changes (NATS not connected yet, then JetStream not
			// enabled), not at every retry
			logger.Warn("worker registry not reachable yet; waiting for NATS", zap.Error(err))
			logged = msg
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

// claimOnce is one ClaimWorkerID attempt, bounded to 5 s plus registry.ClaimWindow: a record left
// by a crashed process of the same id is watched for a heartbeat for ClaimWindow (15 s) before the
// id is taken over, and a 5 s bound cut every such watch short, so a restart after a crash waited
// for the record's TTL (30 s) under a "registry not reachable" warning (operator test).
func claimOnce(ctx context.Context, nc *nats.Conn, id string) error {
	if !nc.IsConnected() {
		return errors.New("NATS not connected yet")
	}
	ctx, cancel := context.WithTimeout(ctx, claimAttemptTimeout)
	defer cancel()
	return ClaimWorkerID(ctx, nc, id)
}

// claimAttemptTimeout bounds one claim: opening the registry (5 s) and watching an earlier record
// of the id for registry.ClaimWindow.
const claimAttemptTimeout = 5*time.Second + registry.ClaimWindow
