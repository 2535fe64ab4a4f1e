package sim_test

import (
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// BenchmarkChainAndCommit hashes a 10 000-token prompt with a video span (625 blocks) and commits
// it to a cache of 1 000 blocks that also holds other chains, so every commit evicts.
func BenchmarkChainAndCommit(b *testing.B) {
	c, err := sim.NewBlockCache(&sim.BlockCacheConfig{Capacity: 1000})
	if err != nil {
		b.Fatal(err)
	}
	prompts := make([]*sim.Prompt, 2)
	for i := range prompts {
		toks := seqTokens(10000, uint32(i)*20000)
		prompts[i] = &sim.Prompt{Tokens: toks, Spans: []blocks.Span{{Start: 100, End: 9000, Identity: kv.Identity(i + 1), Kind: blocks.Video}},
			Identifiers: []string{kv.Identity(i + 1).UUID()}}
	}
	events := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch, err := c.Chain(prompts[i%2])
		if err != nil {
			b.Fatal(err)
		}
		c.HitBlocks(ch)
		c.Commit(ch, func(evs []codec.Event) { events += len(evs) })
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}
