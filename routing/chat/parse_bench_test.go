package chat_test

import (
	"testing"

	"github.com/kvroute/kvroute/routing/chat"
)

// BenchmarkParseCPU parses the bodies of BenchmarkParseRequestConversation (the bench/proxy
// multiturn shape, texts with a \n every 17 words) and BenchmarkParseRequest4k, and reports the
// process CPU time per parse (cpu-µs/op, GC work included) beside the wall time: on a shared
// machine the CPU time is the steadier figure for comparing two builds.
func BenchmarkParseCPU(b *testing.B) {
	for _, c := range []struct {
		name string
		body []byte
	}{{"conversation", chatBodyLong()}, {"4k", chatBody4k()}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			c0 := processCPU()
			for b.Loop() {
				if _, err := chat.ParseRequest(c.body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}
