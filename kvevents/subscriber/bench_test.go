package subscriber_test

import (
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
)

// BenchmarkApply measures the event path end to end over loopback NATS: publish b.N vLLM batches of
// 2 blocks (block size 16; a new chain every 64 batches) for one worker, at most half a queue
// ahead of the subscriber, and wait until the last one is applied: decode, normalize
// (LocalBlockHash), index store. Reports batches/s and blocks/s.
func BenchmarkApply(b *testing.B) {
	for _, form := range []struct {
		name string
		f    codec.Form
	}{{"array", codec.ArrayForm}, {"map", codec.MapForm}} {
		b.Run(form.name, func(b *testing.B) {
			e := newEnv(b, nil)
			e.sub.SetWorkers([]registry.Worker{worker("w", 1)})
			e.waitState("w", subscriber.StateUnsynced)
			var g chainGen
			batches := make([][]byte, b.N)
			for i := range batches {
				batches[i] = g.stored(b, 2, i%64 != 0, form.f)
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			const window = subscriber.DefaultQueueLength / 2 // stay below the subscription channel
			for i, data := range batches {
				e.publish("w", uint64(i), 0, "vllm", data)
				if i%window == window-1 {
					wait.For(b, "window", func() bool {
						r, _ := e.rank0("w")
						return r.LastSeq != nil && *r.LastSeq+window/2 >= uint64(i)
					})
				}
			}
			e.waitSeq("w", uint64(b.N-1))
			el := time.Since(start).Seconds()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el, "batches/s")
			b.ReportMetric(float64(2*b.N)/el, "blocks/s")
			// batches the NATS client dropped (full subscription channel) come back as gaps
			b.ReportMetric(float64(e.events("w")[subscriber.ResultGap]), "gaps")
		})
	}
}
