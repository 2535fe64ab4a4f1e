// Package index is kvroute's per-worker KV block index (DESIGN.md §2, §5, §7): for a request's complete
// blocks, given as their LocalBlockHash values (kv.BlockHash) in prompt order, it answers for every
// worker (a worker id plus a data-parallel rank) how many leading blocks that worker holds in its KV
// cache.
//
// The structure follows Dynamo's radix tree (lib/kv-router/src/indexer/radix_tree.rs): nodes are keyed
// by the local hash of a block under its parent node, so a node stands for a whole chain prefix, and each
// node records which workers hold it. Workers name their blocks by the engine's own block hash
// (kv.EngineHash); the index keeps, per worker, a map from engine hash to the worker's entry on a
// node, used to resolve the parent of a stored block and to apply removals (llm-d calls this the
// dual-key design).
//
// Layout, chosen for the request path and for memory (measured in index_bench_test.go):
//   - nodes (24 bytes) and (worker, node) entries (48 bytes) live in paged arenas indexed by int32, so
//     growth never copies under the lock and the structures hold no pointers for the GC to scan;
//   - a node with one child keeps it inline, so the common chain walk touches no map; only fan-out
//     goes through a map keyed by (parent, local hash);
//   - the set of workers holding a node is a bitset (one word per 64 workers), so a lookup intersects
//     words instead of visiting workers;
//   - each worker's engine hashes are in an open-addressing table without tombstones (engineMap).
//
// Only leaves are evicted: an entry whose node has no child held (or kept) by the same worker. Removing
// a block that still has descendants of the same worker keeps a placeholder ("ghost") entry, so those
// descendants count again as soon as the worker stores the block again; they cannot count while it is
// missing, since only contiguous prefixes score.
//
// Per worker the index also follows the engine's LRU order (age.go): a clock of the blocks the worker
// stored (and of the old blocks a routed hit moved ahead), on each entry the clock of its chain's last use and its depth, and the cache capacity as the
// most blocks the worker held once it evicted. MatchAges returns, with the overlap, the age profile
// of each such worker's matched prefix; Surviving says how much of it outlives a number of new blocks.
//
// Index operations are thread-safe and can be performed concurrently: lookups share a read lock (a
// 256-block lookup holds it for a few microseconds), event application takes the write lock for one
// batch at a time. Index.mu is the only lock; nothing is called while holding it. Touch writes entry stamps and
// advances the worker's clock under the read lock, atomically (lookups read both atomically).
package index
