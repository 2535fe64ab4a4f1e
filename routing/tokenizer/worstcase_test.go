package tokenizer

import (
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// encodeCost returns the smallest CPU time of one sample of encoding text
// calls times, over reps samples. Samples of the two sizes are interleaved by
// the caller, and a GC runs before each, so both see the same conditions.
func encodeCost(tok *Tokenizer, text string, calls int) time.Duration {
	runtime.GC()
	return threadCPU(func() {
		for i := 0; i < calls; i++ {
			tok.Encode(text)
		}
	})
}

// TestWorstCaseScaling checks that encoding a 100 KB run of one character
// costs at most 20x a 10 KB run (linear would be 10x, O(n log n) a little
// more, quadratic 100x). Only a ratio of two measured sizes is asserted, so
// the test holds under -race and on a loaded machine: each sample is the
// thread CPU time of 10 encodes of 10 KB or one encode of 100 KB (the same
// number of bytes), the two sizes interleaved, the minimum of the samples
// kept; a run that exceeds the bound is measured again (up to 3 times) before
// it fails, which absorbs noise but not a quadratic cost.
func TestWorstCaseScaling(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: measures the thread CPU of 10 KB and 100 KB encodes, interleaved, up to 3 rounds, ~25 s")
	}
	tok := loadTest(t)
	runs := []string{"a", " ", "\n", "!", "1", "<", "中", "\u00a0", "\U000323B0", " a"}
	samples := 5
	if raceEnabled {
		runs, samples = []string{"a", " ", "!", "<", "中", "\U000323B0"}, 3
	}
	for _, unit := range runs {
		small := strings.Repeat(unit, 10_000/len(unit))
		large := strings.Repeat(unit, 100_000/len(unit))
		// Correctness first: the run round-trips.
		if got := tok.Decode(tok.Encode(large)); got != norm.NFC.String(large) {
			t.Fatalf("run of %q does not round-trip", unit)
		}
		var ratio float64
		var tSmall, tLarge time.Duration
		for attempt := 0; attempt < 3; attempt++ {
			tSmall, tLarge = time.Duration(1<<62), time.Duration(1<<62)
			for i := 0; i < samples; i++ {
				tSmall = min(tSmall, encodeCost(tok, small, 10)/10)
				tLarge = min(tLarge, encodeCost(tok, large, 1))
			}
			ratio = float64(tLarge) / float64(max(tSmall, time.Microsecond))
			t.Logf("run of %-8q 10 KB %v, 100 KB %v, ratio %.1f", unit, tSmall, tLarge, ratio)
			if ratio <= 20 {
				break
			}
		}
		if ratio > 20 {
			t.Errorf("run of %q: 100 KB costs %.1fx of 10 KB (%v vs %v), want <= 20x", unit, ratio, tLarge, tSmall)
		}
	}
}

// FuzzEncode: Encode never panics; for valid UTF-8 without added-token text,
// Decode(Encode(s)) == NFC(s) (Hugging Face NFC: no stream-safe U+034F), and
// where x/text inserts no U+034F, fullNFC(s) equals x/text NFC (differential
// check of the fallback); ids are within the vocabulary.
func FuzzEncode(f *testing.F) {
	tok := loadTest(f)
	for _, s := range []string{"", "Hello world", "  hello   world  \n\n  x", "a \u00a0b", "\u3000's", "DON'T",
		"cafe\u0301", "e\u0301<|im_end|>\u0301", "<<|im_end|>>", "\r\n\r\n", "12345", "👩‍👩‍👧", "\U0002EBF0's",
		"\U000323B0x", "\xff\xfe", "'ſ", "\u212a", "a" + strings.Repeat("\u0301", 40), "\u1100\u1161\u11a8", "a\u1abf\u0301", "\U00011935\U00011930"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		for _, id := range ids {
			if int(id) >= tok.VocabSize() {
				t.Fatalf("Encode(%q) gave id %d outside the vocabulary", s, id)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		if start, _, _ := tok.added.find(s); start >= 0 {
			return
		}
		if got, want := tok.Decode(ids), nfc(s); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
		if x := norm.NFC.String(s); strings.Count(x, cgj) == strings.Count(s, cgj) && !hasNFCNewer(s) && !hasNFCNewer(x) &&
			fullNFC(s) != x {
			t.Fatalf("fullNFC(%+q) = %+q, x/text NFC %+q", s, fullNFC(s), x)
		}
	})
}
