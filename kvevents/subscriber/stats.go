package subscriber

import (
	"sort"
	"sync/atomic"

	"github.com/kvroute/kvroute/kv/index"
)

// Stream states reported in RankStats.State.
const (
	// StateUnsynced: no batch expected yet; the next batch that arrives sets the stream's position.
	StateUnsynced = "unsynced"
	// StateLive: batches apply as they arrive.
	StateLive = "live"
	// StateReplaying: a replay request is outstanding; later batches are buffered.
	StateReplaying = "replaying"
	// StateSnapshot: a snapshot is being loaded; batches are buffered.
	StateSnapshot = "snapshot"
)

var stateNames = [...]string{StateUnsynced, StateLive, StateReplaying, StateSnapshot}

const (
	stUnsynced uint32 = iota
	stLive
	stReplaying
	stSnapshot
)

// workerView is the lock-free view of one registered worker that Stats reads; the shard that owns
// the worker writes it.
type workerView struct {
	id     string
	counts [numResults]atomic.Uint64
	ranks  []*rankView
}

// rankView is the lock-free view of one stream.
type rankView struct {
	key     index.WorkerKey
	lastSeq atomic.Uint64
	hasSeq  atomic.Bool
	state   atomic.Uint32
}

// Stats is a snapshot of the subscriber, for /kvroute/stats ("events") and /kvroute/workers.
type Stats struct {
	// Events counts every result since the subscriber was created, all workers together (the
	// removed and unregistered ones included), keyed by result name; every name is present.
	Events map[string]uint64 `json:"events"`
	// Dropped counts messages the NATS client dropped because the subscription channel was full.
	Dropped uint64 `json:"dropped"`
	// Workers lists the registered workers, sorted by id.
	Workers []WorkerStats `json:"workers"`
}

// WorkerStats describes one registered worker.
type WorkerStats struct {
	WorkerID string `json:"worker_id"`
	// Blocks is the number of blocks the index holds for the worker, all ranks together.
	Blocks int `json:"blocks"`
	// LastSeq is the last applied seq of rank 0 (nil before the first), the `last_seq` of
	// /kvroute/workers. Ranks has every rank's.
	LastSeq *uint64 `json:"last_seq"`
	// Ranks describes each data-parallel rank (stream), in rank order.
	Ranks []RankStats `json:"ranks"`
	// Events counts the worker's results since it was (last) registered, keyed by result name
	// (zero counts omitted).
	Events map[string]uint64 `json:"events"`
}

// RankStats describes one stream.
type RankStats struct {
	DPRank  int     `json:"dp_rank"`
	Blocks  int     `json:"blocks"`
	LastSeq *uint64 `json:"last_seq"`
	// State is StateUnsynced, StateLive, StateReplaying or StateSnapshot.
	State string `json:"state"`
}

// Stats returns a snapshot. Safe for concurrent use; it takes the index's read lock once per rank.
func (s *Subscriber) Stats() Stats {
	st := Stats{Events: make(map[string]uint64, numResults)}
	for r := result(0); r < numResults; r++ {
		st.Events[resultNames[r]] = s.totals[r].Load()
	}
	s.mu.RLock()
	subs := s.subs
	s.mu.RUnlock()
	for _, sub := range subs {
		if n, err := sub.Dropped(); err == nil && n > 0 {
			st.Dropped += uint64(n)
		}
	}
	s.mu.RLock()
	views := make([]*workerView, 0, len(s.views))
	for _, v := range s.views {
		views = append(views, v)
	}
	s.mu.RUnlock()
	sort.Slice(views, func(i, j int) bool { return views[i].id < views[j].id })
	st.Workers = make([]WorkerStats, 0, len(views))
	for _, v := range views {
		st.Workers = append(st.Workers, s.workerStats(v))
	}
	return st
}

// Worker returns the stats of one registered worker.
func (s *Subscriber) Worker(id string) (WorkerStats, bool) {
	s.mu.RLock()
	v := s.views[id]
	s.mu.RUnlock()
	if v == nil {
		return WorkerStats{}, false
	}
	return s.workerStats(v), true
}

func (s *Subscriber) workerStats(v *workerView) WorkerStats {
	ws := WorkerStats{WorkerID: v.id, Events: map[string]uint64{}, Ranks: make([]RankStats, 0, len(v.ranks))}
	for r := result(0); r < numResults; r++ {
		if n := v.counts[r].Load(); n > 0 {
			ws.Events[resultNames[r]] = n
		}
	}
	for _, rv := range v.ranks {
		rs := RankStats{DPRank: rv.key.DPRank, Blocks: s.ix.WorkerBlocks(rv.key), State: stateNames[rv.state.Load()]}
		if rv.hasSeq.Load() {
			seq := rv.lastSeq.Load()
			rs.LastSeq = &seq
		}
		ws.Blocks += rs.Blocks
		ws.Ranks = append(ws.Ranks, rs)
	}
	if len(ws.Ranks) > 0 {
		ws.LastSeq = ws.Ranks[0].LastSeq
	}
	return ws
}

// count adds n to a result of worker id (v nil for an unregistered worker) and returns the worker's
// new count (the total for unregistered workers), for rate-limited logs.
func (s *Subscriber) count(v *workerView, id string, r result, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	total := s.totals[r].Add(n)
	label := UnregisteredWorker
	if v != nil {
		label = id
		total = v.counts[r].Add(n)
	}
	if s.cfg.OnCount != nil {
		s.cfg.OnCount(label, resultNames[r], n)
	}
	return total
}

// logWorthy reports whether a running count is 1, 2, 4, 8, …: drop reports are logged only then.
func logWorthy(n uint64) bool { return n > 0 && n&(n-1) == 0 }
