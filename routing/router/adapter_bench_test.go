package router

import (
	"fmt"
	"testing"

	"github.com/kvroute/kvroute/kv"
)

// BenchmarkTargetFor compares resolving a request's workers for a base model (workersFor, what
// Route did before adapters) and for an adapter listed last on every worker, over 64 workers that
// list 512 adapters each (registry.MaxAdapters): the worst case of the linear adapter scan.
func BenchmarkTargetFor(b *testing.B) {
	ws := make([]Worker, 64)
	for i := range ws {
		ws[i] = Worker{ID: fmt.Sprintf("w%02d", i), Model: "qwen", Engine: kv.EngineVLLM, BlockSize: 16}
		for j := range 512 {
			ws[i].Adapters = append(ws[i].Adapters, Adapter{Name: fmt.Sprintf("tenant-%04d-lora", j), BaseModel: "qwen"})
		}
	}
	r := &Router{}
	b.Run("base", func(b *testing.B) {
		for b.Loop() {
			if t := r.targetFor(ws, "qwen"); len(t.workers) != 64 {
				b.Fatal(len(t.workers))
			}
		}
	})
	b.Run("adapter", func(b *testing.B) {
		for b.Loop() {
			if t := r.targetFor(ws, "tenant-0511-lora"); len(t.workers) != 64 || t.lora == "" {
				b.Fatal(len(t.workers))
			}
		}
	})
}
