// Package loadsync shares the routers' active-load accounting between kvroute replicas over
// NATS (DESIGN.md §9, subject `kvroute.sync.load`).
//
// Each replica publishes, every Interval, a snapshot of the load it accounted itself per worker
// (prefill tokens, decode blocks, requests). Every other replica applies the difference to its
// previous snapshot from that replica to its own scheduler.Tracker, so the cost function sees the
// load of the whole fleet. A replica that stops publishing (crash, partition) is forgotten after
// Expiry and its load removed: snapshots, unlike raw deltas, heal after lost messages. Load
// accounted between two snapshots is seen by the other replicas up to one Interval late.
//
// Lock order: docs/LOCKS.md (Sync.mu, then the tracker's).
package loadsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/tick"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// Subject is the NATS subject replicas share their load on (DESIGN.md §2.2).
const Subject = wire.LoadSyncSubject

// maxWorkers bounds the workers of one snapshot that are applied (input from other replicas is
// trusted less than our own).
const maxWorkers = 4096

// Tracker is the part of scheduler.Tracker the sync needs.
type Tracker interface {
	Load(w index.WorkerKey) scheduler.Load
	Adjust(w index.WorkerKey, prefillTokens, decodeBlocks, requests int64)
}

// Config configures a Sync.
type Config struct {
	// Replica identifies this router; snapshots carrying it are ignored. Required.
	Replica string
	// Interval is how often the local load is published. Default: 1s.
	Interval time.Duration
	// Expiry is how long a silent replica's load is kept. Default: 5s.
	Expiry time.Duration
	// Logger receives decode warnings. Default: no-op.
	Logger *zap.Logger
}

// snapshot is the wire form: {"replica": id, "loads": {"worker": [prefill, decode, requests]}}.
type snapshot struct {
	Replica string              `json:"replica"`
	Loads   map[string][3]int64 `json:"loads"`
}

type remote struct {
	loads map[string][3]int64
	seen  time.Time
}

// Sync publishes this replica's load and applies the other replicas'. Create it with New.
type Sync struct {
	cfg     Config
	nc      *nats.Conn
	tr      Tracker
	workers func() []string

	// mu protects remotes, applied and lastSent.
	mu       sync.Mutex
	remotes  map[string]*remote
	applied  map[string][3]int64 // worker → sum of all remote loads applied to the tracker
	lastSent map[string][3]int64

	sub    *nats.Subscription
	cancel context.CancelFunc
	done   chan struct{}
	now    func() time.Time
}

// New returns a Sync over tr. workers lists the worker ids whose load is published.
func New(cfg Config, nc *nats.Conn, tr Tracker, workers func() []string) (*Sync, error) {
	if cfg.Replica == "" || nc == nil || tr == nil || workers == nil {
		return nil, errors.New("creating load sync: replica, connection, tracker and workers are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Expiry <= 0 {
		cfg.Expiry = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Sync{cfg: cfg, nc: nc, tr: tr, workers: workers, remotes: map[string]*remote{},
		applied: map[string][3]int64{}, lastSent: map[string][3]int64{}, now: time.Now}, nil
}

// Start subscribes and starts publishing until Stop.
func (s *Sync) Start() error {
	sub, err := s.nc.Subscribe(Subject, s.receive)
	if err != nil {
		return fmt.Errorf("subscribing to %s: %w", Subject, err)
	}
	// The SUB goes out asynchronously: a round trip makes the server hold it before Start returns,
	// so a snapshot another replica publishes after that is received (not an error when the
	// connection is down: the subscription is sent again on reconnect).
	if s.nc.IsConnected() { // not connected yet (NATS late at boot): no round trip to wait for
		_ = s.nc.FlushTimeout(2 * time.Second)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.sub, s.cancel, s.done = sub, cancel, make(chan struct{})
	go s.loop(ctx)
	return nil
}

// Stop unsubscribes, removes the other replicas' load from the tracker and stops publishing.
func (s *Sync) Stop() {
	if s.cancel == nil {
		return
	}
	_ = s.sub.Unsubscribe()
	s.cancel()
	<-s.done
	s.cancel = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.remotes {
		s.forgetLocked(id)
	}
}

func (s *Sync) loop(ctx context.Context) {
	defer close(s.done)
	tick.Every(ctx, s.cfg.Interval, func() {
		s.publish()
		s.expire()
	})
}

// publish sends this replica's own load (tracker load minus what other replicas contributed).
func (s *Sync) publish() {
	s.mu.Lock()
	loads := map[string][3]int64{}
	changed := false
	for _, w := range s.workers() {
		l := s.tr.Load(index.WorkerKey{ID: w})
		a := s.applied[w]
		own := [3]int64{l.PrefillTokens - a[0], l.DecodeBlocks - a[1], l.Requests - a[2]}
		if own != ([3]int64{}) {
			loads[w] = own
		}
		if own != s.lastSent[w] {
			changed = true
		}
	}
	for w := range s.lastSent {
		if _, ok := loads[w]; !ok && s.lastSent[w] != ([3]int64{}) {
			changed = true
		}
	}
	// An idle replica sends nothing: the others expire it. A busy one sends every interval to
	// stay alive, a changed one at once.
	if !changed && len(loads) == 0 {
		s.mu.Unlock()
		return
	}
	s.lastSent = loads
	s.mu.Unlock()
	b, err := json.Marshal(snapshot{Replica: s.cfg.Replica, Loads: loads})
	if err == nil {
		_ = s.nc.Publish(Subject, b)
	}
}

func (s *Sync) receive(m *nats.Msg) {
	var snap snapshot
	if err := json.Unmarshal(m.Data, &snap); err != nil || snap.Replica == "" || len(snap.Loads) > maxWorkers {
		s.cfg.Logger.Debug("load sync: dropping a malformed snapshot", zap.Error(err))
		return
	}
	if snap.Replica == s.cfg.Replica {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.remotes[snap.Replica]
	if prev == nil {
		prev = &remote{loads: map[string][3]int64{}}
		s.remotes[snap.Replica] = prev
	}
	for w, l := range snap.Loads {
		if l[0] < 0 || l[1] < 0 || l[2] < 0 {
			continue
		}
		s.applyLocked(w, prev.loads[w], l)
		prev.loads[w] = l
	}
	for w, old := range prev.loads {
		if _, ok := snap.Loads[w]; !ok {
			s.applyLocked(w, old, [3]int64{})
			delete(prev.loads, w)
		}
	}
	prev.seen = s.now()
}

// applyLocked moves worker w's remote load from old to new. Lock must be held on entry.
func (s *Sync) applyLocked(w string, old, new [3]int64) {
	d := [3]int64{new[0] - old[0], new[1] - old[1], new[2] - old[2]}
	if d == ([3]int64{}) {
		return
	}
	s.tr.Adjust(index.WorkerKey{ID: w}, d[0], d[1], d[2])
	a := s.applied[w]
	s.applied[w] = [3]int64{a[0] + d[0], a[1] + d[1], a[2] + d[2]}
}

func (s *Sync) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := s.now().Add(-s.cfg.Expiry)
	for id, r := range s.remotes {
		if r.seen.Before(cut) {
			s.forgetLocked(id)
		}
	}
}

// forgetLocked removes a replica's load. Lock must be held on entry.
func (s *Sync) forgetLocked(id string) {
	r := s.remotes[id]
	for w, l := range r.loads {
		s.applyLocked(w, l, [3]int64{})
	}
	delete(s.remotes, id)
}

// Replicas lists the replicas whose load is applied, sorted.
func (s *Sync) Replicas() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.remotes))
	for id := range s.remotes {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
