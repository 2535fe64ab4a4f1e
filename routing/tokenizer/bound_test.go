package tokenizer

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/memtest"
)

// boundedTok loads a tokenizer of its own (the bound is set before sharing) with word bound n.
func boundedTok(tb testing.TB, path string, n int) *Tokenizer {
	tb.Helper()
	tok, err := Load(path)
	if err != nil {
		tb.Fatalf("Load(%s): %v", path, err)
	}
	tok.SetMaxWordBytes(n)
	return tok
}

// minBound is the smallest word bound (the word cache's longest word): most goldens hold a
// pre-token over it.
const minBound = maxCachedWordLen

var (
	minBoundMu   sync.Mutex
	minBoundToks = map[string]*Tokenizer{}
)

// minBounded loads the tokenizer at path with the word bound minBound, once per test binary.
func minBounded(tb testing.TB, path string) *Tokenizer {
	tb.Helper()
	minBoundMu.Lock()
	defer minBoundMu.Unlock()
	if tok := minBoundToks[path]; tok != nil {
		return tok
	}
	tok := boundedTok(tb, path, minBound)
	minBoundToks[path] = tok
	return tok
}

// checkBoundedCases encodes every golden case with the smallest word bound (48 bytes): a case
// whose ids hold no TooCostlyID must equal Hugging Face's ids exactly, and a case that holds one
// must be reported by CheckBounded. It returns how many cases met the bound, so the caller can
// tell the bound was exercised.
func checkBoundedCases(t *testing.T, tok *Tokenizer, cases []goldenCase) (over int) {
	t.Helper()
	for _, c := range cases {
		ids := tok.Encode(c.Text)
		err := tok.CheckBounded(len(c.Text), ids)
		if !slices.Contains(ids, TooCostlyID) {
			if !slices.Equal(ids, c.IDs) {
				t.Fatalf("%s: with a word bound the ids differ from Hugging Face's", c.Name)
			}
			if err != nil {
				t.Fatalf("%s: CheckBounded = %v for ids without TooCostlyID", c.Name, err)
			}
			continue
		}
		over++
		if !errors.Is(err, ErrTooCostly) {
			t.Fatalf("%s: ids hold TooCostlyID but CheckBounded = %v", c.Name, err)
		}
	}
	return over
}

// TestBoundedGoldens: with a word bound, every golden case of every tokenizer path (Qwen scanner,
// Llama 3's and Qwen3.5's variants, the o200k and DeepSeek scanners, Gemma's general path) either
// encodes exactly as Hugging Face or is reported too costly; with the default bound (256 KiB) no
// golden case is.
func TestBoundedGoldens(t *testing.T) {
	t.Parallel() // independent: its own tokenizers or the lock-guarded shared ones
	cases := append(corpusCases(t, "tokenizer_corpus.jsonl"), corpusCases(t, "tokenizer_unicode_skew.jsonl")...)
	over := checkBoundedCases(t, minBounded(t, testModelPath), cases)
	t.Logf("qwen3: %d of %d cases hold a pre-token over 48 bytes", over, len(cases))
	if over == 0 || over == len(cases) {
		t.Fatalf("qwen3: %d of %d cases over the 48-byte bound: the test exercises nothing", over, len(cases))
	}
	if n := checkBoundedCases(t, boundedTok(t, testModelPath, DefaultMaxWordBytes), cases); n != 0 {
		t.Fatalf("qwen3: %d golden cases over the default bound", n)
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			fc := familyCases(t, f.name)
			over := checkBoundedCases(t, minBounded(t, familyDir+f.name+"/tokenizer.json"), fc)
			t.Logf("%s: %d of %d cases hold a pre-token over 48 bytes", f.name, over, len(fc))
			if over == 0 {
				t.Fatalf("%s: no case over the 48-byte bound: the test exercises nothing", f.name)
			}
		})
	}
}

// TestBoundedLongWord: a pre-token over the bound becomes TooCostlyID on every tokenizer path,
// in a prompt with text around it, and one at the bound is merged exactly.
func TestBoundedLongWord(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: encodes a word at the bound and 1 MiB words over it, bounded and unbounded, on every tokenizer path, ~15 s")
	}
	const bound = minBound
	paths := map[string]string{"qwen3": testModelPath}
	frees := map[string]*Tokenizer{"qwen3": loadTest(t)} // shared, unbounded
	for _, f := range families {
		paths[f.name] = familyDir + f.name + "/tokenizer.json"
		frees[f.name] = loadFamily(t, f.name)
	}
	for name, path := range paths {
		tok, free := minBounded(t, path), frees[name]
		at := strings.Repeat("x", bound)
		if got, want := tok.Encode(at), free.Encode(at); !slices.Equal(got, want) || slices.Contains(got, TooCostlyID) {
			t.Fatalf("%s: a pre-token of exactly the bound is not encoded exactly", name)
		}
		text := "Hello world, " + strings.Repeat("x", 1<<20) + " goodbye."
		ids := tok.Encode(text)
		if n := strings.Count(string(tok.Decode(ids)), "x"); n > 64 {
			t.Fatalf("%s: %d x's merged: the long pre-token was tokenized", name, n)
		}
		if !slices.Contains(ids, TooCostlyID) || !errors.Is(tok.CheckBounded(len(text), ids), ErrTooCostly) {
			t.Fatalf("%s: a 1 MiB pre-token is not reported too costly: %d ids", name, len(ids))
		}
		over := "Hello " + strings.Repeat("x", 2*bound)
		if tok.CheckBounded(len(over), tok.Encode(over)) == nil || free.CheckBounded(len(over), free.Encode(over)) != nil {
			t.Fatalf("%s: a pre-token of twice the bound: too costly with the bound, never without one", name)
		}
	}
}

// TestBoundedLongWordCost: with the default bound, encoding one long run of "x" costs time
// linear in its length (4 MiB at most 20x 400 KiB: linear is 10x; the unbounded BPE grows as
// n log n with a cache miss per step, and allocates 55 bytes per byte), allocates at most 5
// bytes per byte of text (the ids slice Encode sizes from the text, 4/3 bytes per byte, and the
// normalizer's copy), and leaves nothing on the live heap after GC across 16 distinct words.
// The ratio, not a time, is asserted (see TestWorstCaseScaling).
func TestBoundedLongWordCost(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: times and heap-measures encodes of 400 KiB to 4 MiB words, ~7 s")
	}
	tok := boundedTok(t, testModelPath, DefaultMaxWordBytes)
	small, large := strings.Repeat("x", 400<<10), strings.Repeat("x", 4000<<10) // both over the bound
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	ids := tok.Encode(large)
	runtime.ReadMemStats(&ms1)
	if !slices.Equal(ids, []uint32{TooCostlyID}) {
		t.Fatalf("a 4 MB run of x: %d ids, want [TooCostlyID]", len(ids))
	}
	if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 5*uint64(len(large)) {
		t.Fatalf("encoding a 4 MB run of x allocated %d bytes, want at most 5 per byte (%d)", alloc, 5*len(large))
	}
	var ratio float64
	for attempt := 0; attempt < 3; attempt++ {
		tSmall, tLarge := time.Duration(1<<62), time.Duration(1<<62)
		for range 3 {
			tSmall = min(tSmall, encodeCost(tok, small, 10)/10)
			tLarge = min(tLarge, encodeCost(tok, large, 1))
		}
		ratio = float64(tLarge) / float64(max(tSmall, time.Microsecond))
		t.Logf("run of x: 400 KiB %v, 4000 KiB %v, ratio %.1f", tSmall, tLarge, ratio)
		if ratio <= 20 {
			break
		}
	}
	if ratio > 20 {
		t.Fatalf("4000 KiB run costs %.1fx of 400 KiB, want <= 20x", ratio)
	}
	base := memtest.LiveHeap()
	for i := range 16 {
		w := strings.Repeat(string(rune('a'+i)), 2<<20)
		if ids := tok.Encode(w); !slices.Equal(ids, []uint32{TooCostlyID}) {
			t.Fatalf("word %d: %d ids", i, len(ids))
		}
	}
	if grown := memtest.LiveHeap() - base; grown > 1<<20 {
		t.Fatalf("the live heap grew by %d bytes over 16 long words, want under 1 MiB", grown)
	}
}
