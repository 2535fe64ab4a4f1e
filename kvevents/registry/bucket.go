package registry

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/wire"
)

// Bucket is the NATS JetStream key-value bucket holding worker records (key = worker id).
const Bucket = wire.WorkersBucket

// TTL is how long the bucket keeps a record that is not refreshed (DESIGN.md §2.1).
const TTL = 30 * time.Second

// HeartbeatInterval is how often a Publisher rewrites its record (DESIGN.md §2.1).
const HeartbeatInterval = 10 * time.Second

// BucketConfig is the `kvroute_workers` bucket's configuration (history 1, max age TTL, file
// storage); EnsureBucket sets its replicas.
func BucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "kvroute worker registry (DESIGN.md 2.1)",
		History:     1,
		TTL:         TTL,
		Storage:     jetstream.FileStorage,
	}
}

// OpenBucket returns the `kvroute_workers` bucket, creating it (BucketConfig, replicas
// min(3, cluster size)) when it does not exist yet. An existing bucket is used as it is: only the
// router raises its replicas (OpenRouterBucket), so bridges and simulators never fight over its
// configuration.
func OpenBucket(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	kv, _, err := EnsureBucket(ctx, js, js.Conn(), EnsureConfig{Config: BucketConfig()})
	return kv, err
}

// OpenRouterBucket is OpenBucket for the router: it also raises an existing bucket's replicas to
// min(3, cluster size), and logs the creation, the raise, or (once) a raise that failed.
func OpenRouterBucket(ctx context.Context, js jetstream.JetStream, logger *zap.Logger) (jetstream.KeyValue, EnsureResult, error) {
	return EnsureBucket(ctx, js, js.Conn(), EnsureConfig{Config: BucketConfig(), Update: true, Logger: logger})
}
