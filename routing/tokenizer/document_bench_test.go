package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/cputime"
)

// benchWords are the words of bench/proxy's generated documents (common English words, most of
// them one Qwen token with their leading space).
var benchWords = strings.Fields(`the of and to in is was for that with as on by at from his her their this which
have had are were be been has not but they all one two three new first after time years also other
more some many most such only over into than when would there can may about them made city world
state system water house people part work place group number school family river area report
government company market history language music power field order model data network memory
cache block token worker request route server client engine layer value point table query result
paper study method test case change level rate price energy light space image video frame clip
note page line word text book story game team player season league match club album song film`)

// benchDocument is bench/proxy's cold111k document shape: words pseudo-random words from
// benchWords, ". \n" after every 17th (about 440 kB for 110k tokens).
func benchDocument(seed uint64, words int) string {
	r := rand.New(rand.NewPCG(seed, 0x6b76726f757465))
	var b strings.Builder
	b.Grow(words * 7)
	for i := 0; i < words; i++ {
		if i > 0 {
			if i%17 == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(benchWords[r.IntN(len(benchWords))])
	}
	return b.String()
}

// BenchmarkEncodeDocument encodes a new ~110k-token document of common English words (the
// harness's cold111k user message) with the per-word cache warm, as in a server that has seen
// other documents of the same language: "seq" on one goroutine (encodeSegment), "auto" through
// Encode (parallel chunks on a multi-core machine; no segment cache). cpu-µs/op is the process
// CPU time (all threads, GC included), the steadier figure on a shared machine.
func BenchmarkEncodeDocument(b *testing.B) {
	tok := loadTest(b)
	doc := benchDocument(1, 105000)
	want := tok.Encode(doc)
	for _, mode := range []string{"seq", "auto"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			c0 := cputime.Process()
			for b.Loop() {
				var got []uint32
				if mode == "seq" {
					got = tok.encodeSegment(make([]uint32, 0, len(doc)/3+4), doc, true)
				} else {
					got = tok.Encode(doc)
				}
				if len(got) != len(want) {
					b.Fatalf("got %d ids, want %d", len(got), len(want))
				}
			}
			b.ReportMetric(float64((cputime.Process()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(len(want)), "tokens")
		})
	}
}
