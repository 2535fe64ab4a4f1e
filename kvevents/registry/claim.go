package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrWorkerIDInUse is returned by CheckClaim when another live process publishes the record of
// the worker id.
var ErrWorkerIDInUse = errors.New("worker id in use by another live process")

// ClaimWindow is how long CheckClaim watches an existing record for a heartbeat by default: one
// and a half HeartbeatIntervals, so a live publisher rewrites it at least once meanwhile.
const ClaimWindow = HeartbeatInterval * 3 / 2

// claimPoll is how often CheckClaim reads the record while it watches.
const claimPoll = 100 * time.Millisecond

// CheckClaim tells whether a process about to publish the record of workerID (and to announce its
// events, which resets the worker's blocks on every router) would collide with a live process
// that publishes it already: a second simulator or bridge started with the same id. Two such
// processes overwrite each other's record and reset each other's blocks.
//
// It returns nil at once when the bucket holds no record of the id, or one without an Instance
// (an older publisher, which cannot be told apart). Otherwise it watches the record for up to
// window (ClaimWindow when 0): rewritten meanwhile (the other process heartbeats), it returns
// ErrWorkerIDInUse with that record's endpoint and instance; deleted (the other process stopped),
// or not rewritten within window (it died without deleting its key, which expires at TTL), nil.
// A restart after a crash therefore waits up to window. Errors reading the bucket are returned.
func CheckClaim(ctx context.Context, kv jetstream.KeyValue, workerID string, window time.Duration) error {
	if window <= 0 {
		window = ClaimWindow
	}
	first, err := kv.Get(ctx, workerID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the record of worker %s: %w", workerID, err)
	}
	if rec, err := Decode(workerID, first.Value()); err != nil || rec.Instance == "" {
		return nil // an invalid record is dropped by every router; an old publisher is not told apart
	}
	deadline := time.NewTimer(window)
	defer deadline.Stop()
	tick := time.NewTicker(claimPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return nil
		case <-tick.C:
		}
		e, err := kv.Get(ctx, workerID)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the record of worker %s: %w", workerID, err)
		}
		if e.Revision() == first.Revision() {
			continue
		}
		rec, err := Decode(workerID, e.Value())
		if err != nil || rec.Instance == "" {
			return nil
		}
		return fmt.Errorf("%w: worker %s is published by a process at %s (instance %s) that heartbeats; give each worker its own id",
			ErrWorkerIDInUse, workerID, rec.Endpoint, rec.Instance)
	}
}
