package tokenizer

import (
	"slices"
	"testing"
	"unicode/utf8"
)

// runeStartNear proposes any rune start: most are not pre-token boundaries, so encodeParallel's
// repair path runs.
func runeStartNear(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// TestEncodeParallelExact encodes every golden text in 2, 3, 5 and 8 chunks, with the boundary
// proposal used in production and with arbitrary rune starts, and compares with the golden ids.
// The chunks run on one goroutine each, and (5 and 8 chunks) on two goroutines taking them in
// turn, as encodeSegmentAuto does.
func TestEncodeParallelExact(t *testing.T) {
	t.Parallel() // independent: its own tokenizers or the lock-guarded shared ones
	tok := loadTest(t)
	cases := allGoldenCases(t)
	for _, near := range []struct {
		name string
		f    func(string, int) int
	}{{"preTokenStartNear", preTokenStartNear}, {"runeStartNear", runeStartNear}} {
		repairs := 0
		for _, parts := range []int{2, 3, 5, 8} {
			for _, tc := range cases {
				var ids []uint32
				rest := tc.Text
				// split at added tokens as Encode does; each segment in parallel chunks
				for len(rest) > 0 {
					start, end, id := tok.added.find(rest)
					if start < 0 {
						start, end = len(rest), len(rest)
					}
					var r int
					workers := parts
					if parts >= 5 {
						workers = 2
					}
					ids, r = tok.encodeParallelOn(ids, rest[:start], parts, workers, near.f)
					repairs += r
					if end > start {
						ids = append(ids, id)
					}
					rest = rest[end:]
				}
				if !slices.Equal(ids, tc.IDs) {
					t.Fatalf("%s, %d chunks, %s: ids differ from the golden ids", near.name, parts, tc.Name)
				}
			}
		}
		t.Logf("%s: %d chunks repaired", near.name, repairs)
		if near.name == "runeStartNear" && repairs == 0 {
			t.Error("arbitrary chunk starts never needed a repair: the repair path is untested")
		}
	}
}

// TestEncodeParallelBoundaries checks that the production boundary proposal needs no repair on
// the 1 MB golden text (so the chunks really run in parallel), and that Encode takes the
// parallel path there and still gives the golden ids.
func TestEncodeParallelBoundaries(t *testing.T) {
	tok := loadTest(t)
	text, want := read1MB(t)
	got, repaired := tok.encodeParallel(nil, text, 8, preTokenStartNear)
	if repaired != 0 {
		t.Errorf("%d of 8 chunks repaired", repaired)
	}
	if !slices.Equal(got, want) {
		t.Fatal("8 chunks: ids differ from the golden ids")
	}
	if !slices.Equal(tok.Encode(text), want) {
		t.Fatal("Encode: ids differ from the golden ids")
	}
}

// BenchmarkEncode1MBChunks compares one goroutine with GOMAXPROCS chunks on the 1 MB golden
// text (warm word cache, no segment cache).
func BenchmarkEncode1MBChunks(b *testing.B) {
	tok := loadTest(b)
	text, want := read1MB(b)
	for _, mode := range []string{"sequential", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				var got []uint32
				if mode == "sequential" {
					got = tok.encodeSegment(nil, text, true)
				} else {
					got = tok.encodeSegmentAuto(nil, text, true)
				}
				if len(got) != len(want) {
					b.Fatalf("%d ids, want %d", len(got), len(want))
				}
			}
		})
	}
}
