package registry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// MaxReplicas is the replica count kvroute gives its buckets on a cluster of three servers or more
// (DESIGN.md §2.1): a bucket survives the loss of one server.
const MaxReplicas = 3

// JetStream API error codes (nats-server v2.15 server/errors.json) that mean "fewer replicas":
// the cluster has fewer servers with JetStream than asked for, or the server is not clustered.
const (
	errCodeNoPeers               jetstream.ErrorCode = 10005 // JSClusterNoPeersErrF
	errCodeInsufficientResources jetstream.ErrorCode = 10023 // JSInsufficientResourcesErr
	errCodeReplicasNotSupported  jetstream.ErrorCode = 10074 // JSStreamReplicasNotSupportedErr
)

// EnsureConfig configures EnsureBucket.
type EnsureConfig struct {
	// Config is the bucket's configuration; its Replicas is ignored (the rule sets it).
	Config jetstream.KeyValueConfig
	// Update raises the replicas of an existing bucket that has fewer than the rule asks for (the
	// router does; publishers only create). A failed raise is logged as a warning once per process
	// and bucket.
	Update bool
	// ClusterSize overrides the number of servers (0: ClusterSize of the connection).
	ClusterSize int
	// Logger receives the creation, the raise and the warning. Default: a no-op logger.
	Logger *zap.Logger
}

// EnsureResult says what EnsureBucket found or did.
type EnsureResult struct {
	// Want is min(MaxReplicas, cluster size); Replicas the bucket's replica count now.
	Want, Replicas int
	// Created is true when this call created the bucket, Updated when it raised its replicas.
	Created, Updated bool
}

// warned holds the buckets whose "too few replicas" warning this process logged already.
var warned sync.Map

// ClusterSize estimates the number of NATS servers of nc's cluster: 1 when the connected server
// is not clustered, else the distinct server URLs nc knows (its configured ones and the ones the
// cluster advertises in INFO connect_urls). An advertisement turned off (no_advertise) or a
// server listed under two names makes it wrong; EnsureBucket then steps down when the cluster
// refuses the replicas.
func ClusterSize(nc *nats.Conn) int {
	if nc == nil || nc.ConnectedClusterName() == "" {
		return 1
	}
	hosts := map[string]bool{}
	for _, s := range nc.Servers() {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			hosts[u.Host] = true
		}
	}
	return max(1, len(hosts))
}

// EnsureBucket opens the key-value bucket cfg.Config.Bucket, creating it with
// replicas = min(MaxReplicas, cluster size) when it does not exist (stepping down while the
// cluster refuses that many), and, with cfg.Update, raising an existing bucket's replicas to that
// number. The rule of DESIGN.md §2.1, for every kvroute bucket (`kvroute_workers`,
// `kvroute_responses`). Errors: the lookup's or the creation's (e.g. NATS not reachable).
func EnsureBucket(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, cfg EnsureConfig) (jetstream.KeyValue, EnsureResult, error) {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	name := cfg.Config.Bucket
	size := cfg.ClusterSize
	if size <= 0 {
		size = ClusterSize(nc)
	}
	res := EnsureResult{Want: min(MaxReplicas, size)}
	kv, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, res.Replicas, err = create(ctx, js, cfg.Config, res.Want)
		if err == nil {
			res.Created = true
			log.Info("created NATS KV bucket", zap.String("bucket", name), zap.Int("replicas", res.Replicas), zap.Int("cluster_size", size))
			return kv, res, nil
		}
		if !errors.Is(err, jetstream.ErrBucketExists) {
			return nil, res, fmt.Errorf("creating bucket %s: %w", name, natsutil.JetStreamHint(err))
		}
		kv, err = js.KeyValue(ctx, name) // created concurrently by another process
	}
	if err != nil {
		return nil, res, fmt.Errorf("looking up bucket %s: %w", name, natsutil.JetStreamHint(err))
	}
	stream, err := js.Stream(ctx, "KV_"+name)
	if err != nil {
		// the bucket exists but its stream does not answer (no leader): use it as it is
		log.Warn("NATS KV bucket found but its stream info is unavailable", zap.String("bucket", name), zap.Error(err))
		return kv, res, nil
	}
	info := stream.CachedInfo()
	res.Replicas = info.Config.Replicas
	if res.Replicas >= res.Want || !cfg.Update {
		return kv, res, nil
	}
	sc := info.Config
	sc.Replicas = res.Want
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		if _, done := warned.LoadOrStore(name, true); !done {
			log.Warn("NATS KV bucket has fewer replicas than the cluster allows; losing the server that holds it stops it",
				zap.String("bucket", name), zap.Int("replicas", res.Replicas), zap.Int("want", res.Want),
				zap.Int("cluster_size", size), zap.Error(err))
		}
		return kv, res, nil
	}
	log.Info("raised NATS KV bucket replicas", zap.String("bucket", name), zap.Int("from", res.Replicas), zap.Int("replicas", res.Want), zap.Int("cluster_size", size))
	res.Replicas, res.Updated = res.Want, true
	return kv, res, nil
}

// create creates the bucket with want replicas, one fewer each time the cluster refuses them.
func create(ctx context.Context, js jetstream.JetStream, c jetstream.KeyValueConfig, want int) (jetstream.KeyValue, int, error) {
	for r := want; ; r-- {
		c.Replicas = r
		kv, err := js.CreateKeyValue(ctx, c)
		var apiErr *jetstream.APIError
		if err != nil && r > 1 && errors.As(err, &apiErr) {
			switch apiErr.ErrorCode {
			case errCodeNoPeers, errCodeInsufficientResources, errCodeReplicasNotSupported:
				continue
			}
		}
		return kv, r, err
	}
}
