package main

import (
	"context"
	"fmt"
	"math"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/sim"
)

// chains returns every request's block chain as the simulated worker computes it (its own
// frontend: template, tokenizer; the same hashes its block cache keys on).
func chains(ctx context.Context, fe *sim.Frontend, bc *sim.BlockCache, reqs []request) ([]*sim.Chain, error) {
	out := make([]*sim.Chain, len(reqs))
	for i, r := range reqs {
		p, err := fe.Prepare(ctx, r.Body)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		if out[i], err = bc.Chain(p); err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
	}
	return out, nil
}

// distinctBlocks counts the distinct complete blocks of the workload.
func distinctBlocks(chs []*sim.Chain) int {
	seen := map[kv.EngineHash]struct{}{}
	for _, ch := range chs {
		for _, h := range ch.Hashes {
			seen[h] = struct{}{}
		}
	}
	return len(seen)
}

// oracleResult is the offline assignment's outcome.
type oracleResult struct {
	Cached, Prompt int
	PerWorker      []int
}

// greedyOracle assigns the requests in order, each to the worker whose cache (a sim.BlockCache of
// the given capacity, LRU as the simulator's) holds the longest prefix of it, among the workers
// whose request count stays within bound × the average so far (ceil(bound·(i+1)/workers)); ties go
// to the worker with fewer requests, then the lower index. It knows the request sequence and
// serves one request at a time, so it is a reference for the hit rate, not for latency.
func greedyOracle(chs []*sim.Chain, workers, capacity, blockSize int, bound float64) (oracleResult, error) {
	caches := make([]*sim.BlockCache, workers)
	for i := range caches {
		c, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: blockSize, Capacity: capacity})
		if err != nil {
			return oracleResult{}, err
		}
		caches[i] = c
	}
	res := oracleResult{PerWorker: make([]int, workers)}
	for i, ch := range chs {
		limit := int(math.Ceil(bound * float64(i+1) / float64(workers)))
		best, bestHit := -1, -1
		for w, c := range caches {
			if res.PerWorker[w] >= limit {
				continue
			}
			hit := c.PeekBlocks(ch)
			if hit > bestHit || (hit == bestHit && res.PerWorker[w] < res.PerWorker[best]) {
				best, bestHit = w, hit
			}
		}
		res.PerWorker[best]++
		res.Cached += caches[best].HitBlocks(ch) * blockSize // the chosen worker's hit, LRU touched
		res.Prompt += ch.NumTokens
		caches[best].Commit(ch, nil)
	}
	return res, nil
}
