package index

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvroute/kvroute/kv"
)

// WorkerKey identifies one KV cache: a worker id (DESIGN.md §2.1) and a data-parallel rank.
type WorkerKey struct {
	ID     string
	DPRank int
}

// String returns "id" for rank 0 and "id/rank" otherwise.
func (k WorkerKey) String() string {
	if k.DPRank == 0 {
		return k.ID
	}
	return fmt.Sprintf("%s/%d", k.ID, k.DPRank)
}

// compareKeys orders worker keys by id, then dp rank.
func compareKeys(a, b WorkerKey) int {
	if c := cmp.Compare(a.ID, b.ID); c != 0 {
		return c
	}
	return cmp.Compare(a.DPRank, b.DPRank)
}

// StoredBlock is one block of a BlockStored event after normalization (DESIGN.md §2, §5).
//
// EngineHash is the engine's own block hash (signed engine hashes reinterpreted as u64), used only as
// the key for later removals and as the parent reference of the next block. Parent is the engine hash of
// the block before it in the chain; HasParent false means the block starts a chain (its parent is the
// root). LocalHash is the LocalBlockHash of §5, the key the radix tree is walked by.
type StoredBlock struct {
	EngineHash kv.EngineHash
	Parent     kv.EngineHash
	HasParent  bool
	LocalHash  kv.BlockHash
}

// ErrUnknownParent is returned (wrapped in an *UnknownParentError) when a stored block names a parent
// engine hash the worker does not hold in the index. The caller should request a replay for the worker.
var ErrUnknownParent = errors.New("unknown parent block")

// ErrTooManyWorkers is returned when more than MaxWorkers workers would be tracked at once.
var ErrTooManyWorkers = errors.New("too many workers")

// UnknownParentError reports the first block of a Store call whose parent is unknown. The blocks before
// it (Position of them) were applied; it and the blocks after it were not.
type UnknownParentError struct {
	Worker   WorkerKey
	Parent   kv.EngineHash
	Position int
}

func (e *UnknownParentError) Error() string {
	return fmt.Sprintf("storing block %d for worker %s: parent %d: %v", e.Position, e.Worker, e.Parent, ErrUnknownParent)
}

// Unwrap makes errors.Is(err, ErrUnknownParent) true.
func (e *UnknownParentError) Unwrap() error { return ErrUnknownParent }

// Config bounds the index. Zero or negative values mean the default.
type Config struct {
	// MaxBlocksPerWorker caps the (worker, block) entries of one worker; beyond it the worker's least
	// recently stored leaves are evicted. Default: 1<<20.
	MaxBlocksPerWorker int
	// MaxBlocks caps the (worker, block) entries of all workers together; beyond it the least recently
	// stored leaves of any worker are evicted. Default: 1<<24 (about 1.5 GiB at ~90 bytes per entry);
	// at most 1<<30.
	MaxBlocks int
	// MaxWorkers caps the number of workers tracked at once (each a worker id and dp rank). Default: 4096,
	// at most 65535.
	MaxWorkers int
}

// DefaultConfig returns the default limits.
func DefaultConfig() *Config {
	return &Config{MaxBlocksPerWorker: 1 << 20, MaxBlocks: 1 << 24, MaxWorkers: 4096}
}

// Overlap is the number of leading blocks of a query one worker holds.
type Overlap struct {
	Worker WorkerKey
	Blocks int
}

// AgedOverlap is an Overlap with what MatchAges adds (age.go): the prefix's age profile and the
// worker's learned cache capacity in blocks (CacheBlocks, 0 while unknown: no eviction seen).
type AgedOverlap struct {
	Overlap
	Ages        []AgeStep
	CacheBlocks float64
}

// WorkerStats counts the blocks of one worker.
type WorkerStats struct {
	Worker WorkerKey
	// Blocks is the number of blocks the worker holds (distinct nodes).
	Blocks int
	// Entries adds the placeholders kept for removed blocks that still have descendants.
	Entries int
}

// Stats describes the index size.
type Stats struct {
	// Blocks is the number of distinct blocks (radix nodes, root excluded).
	Blocks int
	// Entries is the number of (worker, block) entries, placeholders included.
	Entries int
	// Bytes approximates the heap held by the index structures.
	Bytes int64
	// Evictions counts entries evicted by the caps since the index was created.
	Evictions uint64
	// Workers lists every tracked worker, by worker id, then dp rank.
	Workers []WorkerStats
}

// Index is the per-worker KV block index. Create it with New. All methods are safe for concurrent use.
//
// Lock order: docs/LOCKS.md (Index.mu is a leaf).
type Index struct {
	cfg Config

	// mu protects every field below. Match and Stats hold it for reading; Store, Remove, Clear and
	// RemoveWorker hold it for writing for the duration of one call (one event batch).
	mu sync.RWMutex
	t  tree
	// workers maps a key to its state; slots maps a bitset slot back to it (nil when free).
	workers   map[WorkerKey]*worker
	slots     []*worker
	freeSlots []uint16
	// order lists the slots in use sorted by worker key (id, then dp rank), for Match's output.
	order []uint16
	// liveMask has the bit of every slot in use, one word per 64 slots (len == t.stride).
	liveMask  []uint64
	evictions uint64
	// clock stamps leaves as they are stored (see entry.stamp).
	clock uint32
}

// worker is the per-worker state. Fields are protected by Index.mu.
type worker struct {
	key  WorkerKey
	slot uint16
	// byEngine maps every engine hash the worker holds to its entry.
	byEngine engineMap
	// extra lists the further engine hashes of an entry that was stored under more than one engine hash
	// (rare: two engine hashes of one content); the entry's own hash is the first.
	extra map[int32][]kv.EngineHash
	// held counts entries that hold a block; ghosts counts placeholders.
	held, ghosts int
	// leafHead/leafTail is the worker's list of evictable leaves, oldest first.
	leafHead, leafTail int32
	// clock counts the blocks the worker stored, and the old blocks Touch moved ahead (wraps;
	// ages are differences; atomic because Touch advances it under the read lock); maxHeld is the
	// most blocks it held at once, its cache capacity once evicted is set by a removal (age.go).
	clock   atomic.Uint32
	maxHeld int
	evicted bool
}

// New returns an empty index. A nil cfg means DefaultConfig().
func New(cfg *Config) (*Index, error) {
	c, err := limits(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating index: %w", err)
	}
	x := &Index{cfg: c, workers: make(map[WorkerKey]*worker)}
	x.t.init()
	x.liveMask = make([]uint64, x.t.stride)
	return x, nil
}

// limits returns cfg with the defaults filled in (nil is DefaultConfig()), or why it is refused.
func limits(cfg *Config) (Config, error) {
	def := DefaultConfig()
	c := *def
	if cfg != nil {
		c = *cfg
		if c.MaxBlocksPerWorker <= 0 {
			c.MaxBlocksPerWorker = def.MaxBlocksPerWorker
		}
		if c.MaxBlocks <= 0 {
			c.MaxBlocks = def.MaxBlocks
		}
		if c.MaxWorkers <= 0 {
			c.MaxWorkers = def.MaxWorkers
		}
	}
	if c.MaxWorkers > 65535 {
		return c, fmt.Errorf("max_workers %d above 65535", c.MaxWorkers)
	}
	// Nodes never outnumber entries (every node on the path to an entry carries an entry of that
	// worker, held or placeholder), so int32 arena indices are safe below this bound.
	if c.MaxBlocks > 1<<30 || c.MaxBlocksPerWorker > 1<<30 {
		return c, fmt.Errorf("block caps above %d", 1<<30)
	}
	return c, nil
}

// workerLocked returns the worker's state, creating it when create is set.
// Lock should be held for writing on entry.
func (x *Index) workerLocked(k WorkerKey, create bool) (*worker, error) {
	if w := x.workers[k]; w != nil || !create {
		return w, nil
	}
	var slot uint16
	if n := len(x.freeSlots); n > 0 {
		slot = x.freeSlots[n-1]
		x.freeSlots = x.freeSlots[:n-1]
	} else {
		if len(x.slots) >= x.cfg.MaxWorkers {
			return nil, fmt.Errorf("adding worker %s: %w", k, ErrTooManyWorkers)
		}
		slot = uint16(len(x.slots))
		x.slots = append(x.slots, nil)
	}
	if need := int(slot)/64 + 1; need > x.t.stride {
		x.t.growStride(need)
		m := make([]uint64, need)
		copy(m, x.liveMask)
		x.liveMask = m
	}
	w := &worker{key: k, slot: slot, leafHead: nilIdx, leafTail: nilIdx}
	x.workers[k] = w
	x.slots[slot] = w
	x.liveMask[slot/64] |= 1 << (slot % 64)
	i, _ := slices.BinarySearchFunc(x.order, k, func(s uint16, k WorkerKey) int { return compareKeys(x.slots[s].key, k) })
	x.order = slices.Insert(x.order, i, slot)
	return w, nil
}

// Store applies one BlockStored event of a worker: blocks in order, each under its parent (the root when
// HasParent is false). A block already stored under the same engine hash and position is refreshed in
// the LRU order; an engine hash reused at another position moves there. A block whose parent the worker
// does not hold stops the call with an *UnknownParentError (errors.Is ErrUnknownParent); the blocks
// before it stay applied, which is consistent state (each is a valid stored block). A block naming
// itself as parent is skipped. After the batch the caps are enforced by evicting the oldest leaves.
// ctx is not consulted: a batch is applied whole.
func (x *Index) Store(ctx context.Context, k WorkerKey, blocks []StoredBlock) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	w, err := x.workerLocked(k, true)
	if err != nil {
		return fmt.Errorf("storing blocks: %w", err)
	}
	// The event's blocks age from the clock after it (age.go).
	w.clock.Add(uint32(len(blocks)))
	for i := range blocks {
		if err := x.storeLocked(w, &blocks[i]); err != nil {
			err.Position = i
			x.enforceCapsLocked(w)
			return err
		}
	}
	x.enforceCapsLocked(w)
	return nil
}

// Remove applies one BlockRemoved event: each engine hash the worker holds is dropped; unknown hashes are
// ignored (Dynamo tolerates BlockNotFound). It returns how many hashes were known.
func (x *Index) Remove(ctx context.Context, k WorkerKey, engineHashes []kv.EngineHash) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.workers[k]
	if w == nil {
		return 0
	}
	n := 0
	for _, h := range engineHashes {
		if x.removeEngineLocked(w, h) {
			n++
		}
	}
	// The engine evicted: its cache was full, so the most blocks it held is its capacity (age.go).
	w.evicted = w.evicted || n > 0
	return n
}

// Clear applies AllBlocksCleared: the worker keeps its registration but holds nothing.
func (x *Index) Clear(ctx context.Context, k WorkerKey) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if w := x.workers[k]; w != nil {
		x.purgeLocked(w)
		// An emptied cache evicts nothing until it is full again (age.go).
		w.maxHeld, w.evicted = 0, false
	}
}

// RemoveWorker purges every entry of the worker and forgets it.
func (x *Index) RemoveWorker(ctx context.Context, k WorkerKey) {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.workers[k]
	if w == nil {
		return
	}
	x.purgeLocked(w)
	x.order = slices.DeleteFunc(x.order, func(s uint16) bool { return s == w.slot })
	delete(x.workers, k)
	x.slots[w.slot] = nil
	x.liveMask[w.slot/64] &^= 1 << (w.slot % 64)
	x.freeSlots = append(x.freeSlots, w.slot)
}

// WorkerBlocks returns the number of blocks the worker holds (0 for an unknown worker).
func (x *Index) WorkerBlocks(k WorkerKey) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if w := x.workers[k]; w != nil {
		return w.held
	}
	return 0
}

// Stats returns the current sizes. Bytes is an estimate from the arena capacities and map sizes
// (see the benchmarks for measured heap bytes).
func (x *Index) Stats() Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s := Stats{
		Blocks:    x.t.liveNodes,
		Entries:   x.t.liveEntries,
		Evictions: x.evictions,
		Workers:   make([]WorkerStats, 0, len(x.workers)),
	}
	// Arenas at capacity (paged), maps by their key counts.
	s.Bytes = int64(x.t.nodes.capacity())*(nodeSize+8*int64(x.t.stride)) + int64(x.t.entries.capacity())*entrySize +
		int64(len(x.t.kids))*kidSlotBytes
	for _, slot := range x.order {
		w := x.slots[slot]
		s.Workers = append(s.Workers, WorkerStats{Worker: w.key, Blocks: w.held, Entries: w.held + w.ghosts})
		s.Bytes += w.byEngine.bytes()
	}
	return s
}

// SetLimits replaces the block caps (MaxBlocksPerWorker, MaxBlocks; zero or negative fields take the
// default) and MaxWorkers (it limits the workers added from now on; the tracked ones stay). The
// index outlives a config reload in the kvroute app, and a reload may change its bounds: lowered
// caps evict at once, by the same rule as a Store over the cap (each worker's oldest leaves, then
// the oldest leaves of any worker). The bounds checks are New's.
func (x *Index) SetLimits(cfg *Config) error {
	c, err := limits(cfg)
	if err != nil {
		return fmt.Errorf("setting index limits: %w", err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.cfg = c
	for _, w := range x.slots {
		if w != nil {
			x.enforceCapsLocked(w)
		}
	}
	return nil
}

// Limits returns the bounds in use (defaults filled in).
func (x *Index) Limits() Config {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.cfg
}
