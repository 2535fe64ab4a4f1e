package chat_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/cputime"

	"github.com/kvroute/kvroute/routing/chat"
)

// BenchmarkParseCPU parses the bodies of BenchmarkParseRequestConversation (the bench/proxy
// multiturn shape, texts with a \n every 17 words) and BenchmarkParseRequest4k, and reports the
// process CPU time per parse (cpu-µs/op, GC work included) beside the wall time: on a shared
// machine the CPU time is the steadier figure for comparing two builds.
//
// conversation-texts is a floor, not a parse: it only allocates and copies the conversation's
// decoded message texts (strings.Clone of each), which any parser that returns strings of
// their own (not aliasing the body) must do; the parse of conversation costs this plus its
// scan, decode and tree.
func BenchmarkParseCPU(b *testing.B) {
	long := chatBodyLong()
	var decoded struct{ Messages []struct{ Content string } }
	if err := json.Unmarshal(long, &decoded); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body []byte
		run  func() error
	}{
		{"conversation", long, func() error { _, err := chat.ParseRequest(long); return err }},
		{"conversation-texts", long, func() error {
			for _, m := range decoded.Messages {
				sink = strings.Clone(m.Content)
			}
			return nil
		}},
		{"4k", chatBody4k(), nil},
	} {
		if c.run == nil {
			c.run = func() error { _, err := chat.ParseRequest(c.body); return err }
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			c0 := cputime.Process()
			for b.Loop() {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cputime.Process()-c0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		})
	}
}

// sink keeps the floor's copies from being optimized away.
var sink string
