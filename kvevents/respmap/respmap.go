// Package respmap is the map from a stored response's id to the worker that holds it (DESIGN.md
// §1.1): vLLM keeps a response made with `store: true` in the memory of that one worker, so a
// follow-up (`previous_response_id`) and GET/DELETE/cancel of the response must reach it.
//
// The map has two levels: a local LRU bounded in entries, each entry living at most TTL (a
// follow-up after that is answered as unknown), and the JetStream KV bucket `kvroute_responses`
// (key = response id, value {"worker_id"}, max age TTL) that every replica writes and reads, so a
// replica started later, or restarted, knows the responses the others proxied. Without the bucket
// (NATS not connected yet, JetStream unavailable) the local level works alone: a replica knows the
// responses it proxied itself.
package respmap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// Defaults (docs/configuration.md, `responses`).
const (
	DefaultTTL      = 24 * time.Hour
	DefaultMaxLocal = 100_000
	// lookupTimeout bounds a bucket read on the request path.
	lookupTimeout = 2 * time.Second
	// queueLen bounds the writes waiting for the bucket; beyond it a write is dropped (counted:
	// the local level still has the entry).
	queueLen = 4096
)

// keyRE is what a NATS KV key may hold; ids outside it (or longer than 256) stay local only.
var keyRE = regexp.MustCompile(`^[-_=.A-Za-z0-9]{1,256}$`)

// Record is the bucket value.
type Record struct {
	WorkerID string `json:"worker_id"`
}

// Source says where Lookup found an entry.
type Source string

const (
	SourceLocal  Source = "local"
	SourceBucket Source = "bucket"
)

// Map is safe for concurrent use.
type Map struct {
	local *expirable.LRU[string, string]
	ttl   time.Duration
	log   *zap.Logger

	kv     atomic.Pointer[kvBox]
	queue  chan queued
	closed chan struct{}
	once   sync.Once

	// Counters (read by metrics and tests).
	Learned, BucketWrites, BucketWriteErrors, BucketDropped, BucketHits atomic.Uint64
}

type kvBox struct{ kv jetstream.KeyValue }

// queued is a queued bucket write.
type queued struct{ ID, WorkerID string }

// New returns a map keeping at most maxLocal entries locally (DefaultMaxLocal when ≤ 0), each for
// ttl (DefaultTTL when ≤ 0).
func New(maxLocal int, ttl time.Duration, log *zap.Logger) *Map {
	if maxLocal <= 0 {
		maxLocal = DefaultMaxLocal
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if log == nil {
		log = zap.NewNop()
	}
	m := &Map{local: expirable.NewLRU[string, string](maxLocal, nil, ttl), ttl: ttl, log: log,
		queue: make(chan queued, queueLen), closed: make(chan struct{})}
	go m.writer()
	return m
}

// TTL is how long an entry lives.
func (m *Map) TTL() time.Duration { return m.ttl }

// Len is the number of local entries.
func (m *Map) Len() int { return m.local.Len() }

// Attach makes the map write to and read from the bucket kv (see OpenBucket).
func (m *Map) Attach(kv jetstream.KeyValue) {
	if kv != nil {
		m.kv.Store(&kvBox{kv})
	}
}

// Shared reports whether the bucket is attached.
func (m *Map) Shared() bool { return m.kv.Load() != nil }

// Close stops the bucket writer (queued writes are dropped).
func (m *Map) Close() { m.once.Do(func() { close(m.closed) }) }

// Learn records that worker holds response id: locally at once, in the bucket in the
// background (never blocking the response stream that carried the id).
func (m *Map) Learn(id, worker string) {
	if id == "" || worker == "" {
		return
	}
	m.local.Add(id, worker)
	m.Learned.Add(1)
	if !keyRE.MatchString(id) {
		return
	}
	select {
	case m.queue <- queued{id, worker}:
	default:
		m.BucketDropped.Add(1)
	}
}

// Lookup returns the worker holding response id: the local entry, else the bucket's (then kept
// locally). ok is false when neither knows it; err reports a bucket that could not be read (the
// id may still be known to other replicas).
func (m *Map) Lookup(ctx context.Context, id string) (worker string, src Source, ok bool, err error) {
	if w, found := m.local.Get(id); found {
		return w, SourceLocal, true, nil
	}
	b := m.kv.Load()
	if b == nil || !keyRE.MatchString(id) {
		return "", "", false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	e, err := b.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	var r Record
	if json.Unmarshal(e.Value(), &r) != nil || r.WorkerID == "" {
		return "", "", false, fmt.Errorf("bucket %s: undecodable record for %q", wire.ResponsesBucket, id)
	}
	m.local.Add(id, r.WorkerID)
	m.BucketHits.Add(1)
	return r.WorkerID, SourceBucket, true, nil
}

// writer drains the queue into the bucket; without a bucket, writes wait in the queue (bounded)
// until one is attached.
func (m *Map) writer() {
	var pending *queued
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if pending == nil {
			select {
			case <-m.closed:
				return
			case r := <-m.queue:
				pending = &r
			}
		}
		b := m.kv.Load()
		if b == nil {
			select {
			case <-m.closed:
				return
			case <-tick.C:
				continue
			}
		}
		v, _ := json.Marshal(Record{WorkerID: pending.WorkerID})
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		_, err := b.kv.Put(ctx, pending.ID, v)
		cancel()
		if err != nil {
			m.BucketWriteErrors.Add(1)
			m.log.Warn("writing stored-response record to the bucket", zap.String("bucket", wire.ResponsesBucket), zap.String("response_id", pending.ID), zap.Error(err))
		} else {
			m.BucketWrites.Add(1)
		}
		pending = nil
	}
}

// OpenBucket returns the `kvroute_responses` bucket, creating it when it does not exist (history
// 1, max age ttl, file storage) or raising an existing one's replicas, by the registry's rule:
// replicas = min(3, clusterSize) (registry.EnsureBucket, DESIGN.md §2.1). An existing bucket's
// other settings are kept, so replicas configured with another response_ttl do not fight over it.
func OpenBucket(ctx context.Context, js jetstream.JetStream, clusterSize int, ttl time.Duration, log *zap.Logger) (jetstream.KeyValue, error) {
	kv, _, err := registry.EnsureBucket(ctx, js, nil, registry.EnsureConfig{
		Config: jetstream.KeyValueConfig{
			Bucket:      wire.ResponsesBucket,
			Description: "kvroute stored responses: response id -> worker (DESIGN.md 1.1)",
			History:     1,
			TTL:         ttl,
			Storage:     jetstream.FileStorage,
		},
		Update:      true,
		ClusterSize: max(1, clusterSize),
		Logger:      log,
	})
	return kv, err
}
