package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// BenchmarkSelect scores 64 candidates with loads, at temperature 0 and 0.5.
func BenchmarkSelect(b *testing.B) {
	for _, temp := range []float64{0, 0.5} {
		b.Run(fmt.Sprintf("T=%v", temp), func(b *testing.B) {
			s, err := scheduler.New(&scheduler.Config{PrefillLoadScale: 1, OverlapCredit: 1, Temperature: temp}, rand.NewPCG(1, 2))
			if err != nil {
				b.Fatal(err)
			}
			cands := make([]scheduler.Candidate, 64)
			for i := range cands {
				w := index.WorkerKey{ID: fmt.Sprintf("worker-%02d", i)}
				s.Tracker().Adjust(w, int64(i*100), int64(i*3), 1)
				cands[i] = scheduler.Candidate{Worker: w, Endpoint: "127.0.0.1:8000", Available: true, OverlapBlocks: i % 7}
			}
			req := scheduler.Request{Tokens: 4096, BlockSize: 16}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Select(req, cands); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandle is the per-request load accounting: Begin, FirstByte, Done.
func BenchmarkHandle(b *testing.B) {
	t := scheduler.NewTracker()
	w := index.WorkerKey{ID: "w"}
	b.ReportAllocs()
	for b.Loop() {
		h := t.Begin(w, 100, 7)
		h.FirstByte()
		h.Done()
	}
}
