package tokenizer

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/cputime"
)

// BenchmarkEncode1MB encodes the 1 MB mixed golden text (376 840 tokens).
// "warm" keeps the per-word cache across iterations (steady state of a
// server), "cold" empties it before each iteration (every word runs BPE).
func BenchmarkEncode1MB(b *testing.B) {
	tok := loadTest(b)
	text, want := read1MB(b)
	for _, mode := range []string{"warm", "cold"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			b.ResetTimer()
			c0 := cputime.Process()
			for i := 0; i < b.N; i++ {
				if mode == "cold" {
					tok.cache.reset()
				}
				if got := tok.Encode(text); len(got) != len(want) {
					b.Fatalf("got %d ids, want %d", len(got), len(want))
				}
			}
			b.ReportMetric(float64(len(want))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			if cpu := cputime.Process() - c0; cpu > 0 {
				b.ReportMetric(float64(len(text))*float64(b.N)/cpu.Seconds()/1e6, "cpu-MB/s")
			}
		})
	}
}

// BenchmarkEncode1MBParallel encodes the 1 MB text from GOMAXPROCS
// goroutines sharing one Tokenizer (cache contention included).
func BenchmarkEncode1MBParallel(b *testing.B) {
	tok := loadTest(b)
	text, _ := read1MB(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok.Encode(text)
		}
	})
}

// BenchmarkEncodeChatPrompt encodes the rendered Qwen3/Qwen3-VL chat prompts
// of chat_cases_qwen3.jsonl, the per-request workload.
func BenchmarkEncodeChatPrompt(b *testing.B) {
	tok := loadTest(b)
	cases := chatCases(b)
	n := 0
	for _, c := range cases {
		n += len(c.Text)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, c := range cases {
			tok.Encode(c.Text)
		}
	}
}

// BenchmarkLoad measures Load of the 11.4 MB Qwen3 tokenizer.json and reports
// the live heap it holds afterwards (heap-MB, after a GC) and the process CPU
// time per Load (cpu-ms/op: all threads, GC included; unlike ns/op it does not
// grow when other processes compete for the CPU).
func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	var heap float64
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		c0 := cputime.Process()
		tok, err := Load(testModelPath)
		if err != nil {
			b.Fatal(err)
		}
		cpu += cputime.Process() - c0
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
		runtime.KeepAlive(tok)
		b.StartTimer()
	}
	b.ReportMetric(heap, "heap-MB")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// BenchmarkEncodeWarmConversation encodes a rendered 99-message conversation (about 100k
// tokens, ChatML as Qwen renders it) whose segments are all in the segment cache: the cost of
// a conversation's earlier turns on every request (split at added tokens, segment hashes and
// lookups, the ids copied out).
func BenchmarkEncodeWarmConversation(b *testing.B) {
	tok := loadTest(b)
	tok.SetSegmentCache(NewSegmentCache(DefaultSegmentCacheBytes))
	text, _ := read1MB(b)
	var prompt strings.Builder
	for i := 0; i < 99; i++ {
		role := []string{"user", "assistant"}[i%2]
		start := (i * 4099) % (len(text) - 5000)
		fmt.Fprintf(&prompt, "<|im_start|>%s\n%s<|im_end|>\n", role, strings.ToValidUTF8(text[start:start+2900], ""))
	}
	prompt.WriteString("<|im_start|>assistant\n")
	p := prompt.String()
	ids := tok.Encode(p)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(p)
	}
	b.ReportMetric(float64(len(ids)), "tokens")
}
