package tokenizer

import (
	"runtime"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/cputime"
)

// BenchmarkEncodeFamilies encodes the 1 MB mixed golden text with each
// tokenizer family and, in the same iteration, with the Qwen3 fast path, so
// both see the same machine load. One op = one encode by each. Metrics:
// MB/s and qwen-MB/s from the thread CPU time of each encode (time waiting
// for a CPU does not count), ratio = family MB/s ÷ Qwen3 fast path MB/s.
// "cold" empties both word caches before each encode (every pre-token runs
// BPE), "warm" keeps them (a server's steady state). qwen3_general is the
// Qwen3 tokenizer forced through the general path (the same regex on
// regexp2): the cost of the general path on identical work; likewise
// llama3_general, gptoss_general and deepseek_v3_general.
func BenchmarkEncodeFamilies(b *testing.B) {
	qwen := loadTest(b)
	text, _ := read1MB(b)
	toks := []struct {
		name string
		tok  func() *Tokenizer
	}{
		{"qwen3_fast", func() *Tokenizer { return qwen }},
		{"qwen3_general", func() *Tokenizer { return generalTwin(b, testModelPath, qwenSplitRegex) }},
		{"qwen35_pretok", func() *Tokenizer { return loadFamily(b, "qwen35_pretok") }},
		{"llama3", func() *Tokenizer { return loadFamily(b, "llama3") }},
		{"llama3_general", func() *Tokenizer { return generalTwin(b, familyDir+"llama3/tokenizer.json", llama3SplitRegex) }},
		{"gemma3", func() *Tokenizer { return loadFamily(b, "gemma3") }},
		{"deepseek_v3", func() *Tokenizer { return loadFamily(b, "deepseek_v3") }},
		{"deepseek_v3_general", func() *Tokenizer {
			tok, err := Load(familyDir + "deepseek_v3/tokenizer.json")
			if err != nil {
				b.Fatal(err)
			}
			tok.fastDeepseek = false
			if tok.stages, _, err = buildStages(deepseekPreTokJSON()); err != nil {
				b.Fatal(err)
			}
			return tok
		}},
		{"gptoss", func() *Tokenizer { return loadFamily(b, "gptoss") }},
		{"gptoss_general", func() *Tokenizer { return generalTwin(b, familyDir+"gptoss/tokenizer.json", o200kSplitRegex) }},
	}
	for _, f := range toks {
		for _, mode := range []string{"cold", "warm"} {
			b.Run(f.name+"/"+mode, func(b *testing.B) {
				tok := f.tok()
				var famCPU, qwenCPU time.Duration
				for b.Loop() {
					if mode == "cold" {
						tok.cache.reset()
						qwen.cache.reset()
					}
					famCPU += threadCPU(func() { tok.Encode(text) })
					qwenCPU += threadCPU(func() { qwen.Encode(text) })
				}
				mb := float64(len(text)) * float64(b.N) / 1e6
				b.ReportMetric(mb/famCPU.Seconds(), "MB/s")
				b.ReportMetric(mb/qwenCPU.Seconds(), "qwen-MB/s")
				b.ReportMetric(qwenCPU.Seconds()/famCPU.Seconds(), "ratio")
			})
		}
	}
}

// BenchmarkLoadFamilies is BenchmarkLoad for each family's tokenizer.json:
// the live heap one loaded Tokenizer holds (heap-MB, after a GC) and the
// process CPU time per Load.
func BenchmarkLoadFamilies(b *testing.B) {
	for _, name := range []string{"llama3", "gemma3", "deepseek_v3", "gptoss", "qwen35_pretok"} {
		b.Run(name, func(b *testing.B) {
			path := familyDir + name + "/tokenizer.json"
			loadFamily(b, name) // fails when make deps has not run
			var heap float64
			var cpu time.Duration
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				c0 := cputime.Process()
				tok, err := Load(path)
				if err != nil {
					b.Fatal(err)
				}
				cpu += cputime.Process() - c0
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
				runtime.KeepAlive(tok)
			}
			b.ReportMetric(heap, "heap-MB")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}
