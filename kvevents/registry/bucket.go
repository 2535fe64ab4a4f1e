package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// Bucket is the NATS JetStream key-value bucket holding worker records (key = worker id).
const Bucket = wire.WorkersBucket

// TTL is how long the bucket keeps a record that is not refreshed (DESIGN.md §2.1).
const TTL = 30 * time.Second

// HeartbeatInterval is how often a Publisher rewrites its record (DESIGN.md §2.1).
const HeartbeatInterval = 10 * time.Second

// OpenBucket returns the `kvroute_workers` bucket, creating it (history 1, max age TTL, file
// storage) when it does not exist yet. An existing bucket is used as it is, so routers, bridges
// and simulators never fight over its configuration.
func OpenBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("looking up bucket %s: %w", Bucket, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "kvroute worker registry (DESIGN.md 2.1)",
		History:     1,
		TTL:         TTL,
		Storage:     jetstream.FileStorage,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		// created concurrently by another process
		kv, err = js.KeyValue(ctx, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("creating bucket %s: %w", Bucket, err)
	}
	return kv, nil
}
