package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// allGoldenCases is every golden text with Hugging Face ids: the corpus, the Unicode skew set,
// tokens.jsonl, the rendered chat prompts and the 1 MB text.
func allGoldenCases(tb testing.TB) []goldenCase {
	tb.Helper()
	cases := corpusCases(tb, "tokenizer_corpus.jsonl")
	cases = append(cases, corpusCases(tb, "tokenizer_unicode_skew.jsonl")...)
	cases = append(cases, tokensCases(tb)...)
	cases = append(cases, chatCases(tb)...)
	text, ids := read1MB(tb)
	return append(cases, goldenCase{Name: "1mb", Text: text, IDs: ids})
}

// TestSegmentCacheExact encodes every golden text through a segment cache, cold then warm, with
// a budget large enough to keep everything and one small enough to evict constantly, and
// compares with the golden ids and the uncached encoder.
func TestSegmentCacheExact(t *testing.T) {
	t.Parallel() // independent: its own tokenizers or the lock-guarded shared ones
	plain := loadTest(t)
	cases := allGoldenCases(t)
	for _, budget := range []int64{DefaultSegmentCacheBytes, 16 << 10} {
		tok, err := Load(testModelPath)
		if err != nil {
			t.Fatal(err)
		}
		c := NewSegmentCache(budget)
		tok.SetSegmentCache(c)
		var afterFirst SegmentCacheStats
		for pass := 0; pass < 2; pass++ {
			if pass == 1 {
				afterFirst = c.Stats()
			}
			for _, tc := range cases {
				got := tok.Encode(tc.Text)
				if !slices.Equal(got, tc.IDs) {
					t.Fatalf("budget %d pass %d %s: cached ids differ from the golden ids", budget, pass, tc.Name)
				}
				if want := plain.Encode(tc.Text); !slices.Equal(got, want) {
					t.Fatalf("budget %d pass %d %s: cached ids differ from uncached", budget, pass, tc.Name)
				}
			}
		}
		st := c.Stats()
		if st.Bytes > budget {
			t.Errorf("budget %d: holds %d bytes", budget, st.Bytes)
		}
		if budget == DefaultSegmentCacheBytes && (st.Misses != afterFirst.Misses || st.Hits != 2*afterFirst.Hits+afterFirst.Misses) {
			t.Errorf("budget %d: first pass %+v, both %+v; every lookup of the second pass should hit", budget, afterFirst, st)
		}
		t.Logf("budget %d: %+v", budget, st)
	}
}

// TestSegmentCacheConversation checks the case the cache is for: a conversation growing by one
// turn per request encodes only the new turn's segment; the earlier turns hit.
func TestSegmentCacheConversation(t *testing.T) {
	tok, err := Load(testModelPath)
	if err != nil {
		t.Fatal(err)
	}
	c := NewSegmentCache(1 << 20)
	tok.SetSegmentCache(c)
	var prompt strings.Builder
	for turn := 0; turn < 10; turn++ {
		fmt.Fprintf(&prompt, "<|im_start|>user\nTurn %d: please explain the routing of request number %d in detail.<|im_end|>\n", turn, turn)
		got := tok.Encode(prompt.String() + "<|im_start|>assistant\n")
		if want := loadTest(t).Encode(prompt.String() + "<|im_start|>assistant\n"); !slices.Equal(got, want) {
			t.Fatalf("turn %d: ids differ from the uncached encoder", turn)
		}
	}
	// segments of at least 64 bytes: one user turn per request; turn k is missed once and hit
	// by the 9-k later requests
	st := c.Stats()
	if st.Misses != 10 || st.Hits != 45 {
		t.Errorf("misses %d hits %d, want 10 and 45", st.Misses, st.Hits)
	}
}

// TestSegmentCacheEviction checks the byte budget and the least-recently-used order.
func TestSegmentCacheEviction(t *testing.T) {
	tok, err := Load(testModelPath)
	if err != nil {
		t.Fatal(err)
	}
	seg := func(i int) string { return fmt.Sprintf("segment %03d %s", i, strings.Repeat("abc ", 30)) }
	one := int64(len(tok.Encode(seg(0))))*4 + segmentEntryOverhead
	c := NewSegmentCache(4 * one) // exactly four entries of this size
	tok.SetSegmentCache(c)
	for i := 0; i < 4; i++ {
		tok.Encode(seg(i))
	}
	tok.Encode(seg(0)) // 0 becomes the most recent: 1 is the least recent
	tok.Encode(seg(4)) // evicts 1
	if st := c.Stats(); st.Entries != 4 || st.Bytes != 4*one || st.Hits != 1 || st.Misses != 5 {
		t.Fatalf("after 5 inserts: %+v, want 4 entries of %d bytes, 1 hit, 5 misses", st, one)
	}
	for _, i := range []int{0, 2, 3, 4} {
		tok.Encode(seg(i))
	}
	if st := c.Stats(); st.Hits != 5 {
		t.Errorf("segments 0, 2, 3, 4 should all be held: %+v", st)
	}
	tok.Encode(seg(1))
	if st := c.Stats(); st.Misses != 6 || st.Entries != 4 {
		t.Errorf("segment 1 should have been evicted: %+v", st)
	}
	if NewSegmentCache(0) != nil {
		t.Error("a zero budget should give no cache")
	}
}

// TestSegmentCacheConcurrent encodes the chat prompts from several goroutines through one small
// cache (run under -race).
func TestSegmentCacheConcurrent(t *testing.T) {
	tok, err := Load(testModelPath)
	if err != nil {
		t.Fatal(err)
	}
	tok.SetSegmentCache(NewSegmentCache(32 << 10))
	cases := chatCases(t)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cases {
				tc := cases[(i+g)%len(cases)]
				if !slices.Equal(tok.Encode(tc.Text), tc.IDs) {
					errs <- tc.Name
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s: ids differ under concurrent use", name)
	}
}

// TestSegmentCacheFamilies encodes every family's golden vectors twice through a segment cache
// (cold, then warm) on a fresh tokenizer of each family, so normalizers, Metaspace's "first"
// segment and the general path are covered too.
func TestSegmentCacheFamilies(t *testing.T) {
	t.Parallel() // independent: its own tokenizers or the lock-guarded shared ones
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tok, err := Load(familyDir + f.name + "/tokenizer.json")
			if err != nil {
				t.Fatalf("%v: run `make deps` to fetch the tokenizer files", err)
			}
			c := NewSegmentCache(DefaultSegmentCacheBytes)
			tok.SetSegmentCache(c)
			cases := familyCases(t, f.name)
			for pass := 0; pass < 2; pass++ {
				for _, tc := range cases {
					if got := tok.Encode(tc.Text); !slices.Equal(got, tc.IDs) {
						t.Fatalf("pass %d %s: cached ids differ from the golden ids", pass, tc.Name)
					}
				}
			}
			if st := c.Stats(); st.Hits == 0 {
				t.Fatalf("no hits: %+v", st)
			}
		})
	}
}

// TestSegmentCacheRepeatedInPrompt covers a segment that occurs more than once in one prompt
// while it is not cached yet (a RAG prompt quoting the same chunk twice): Encode looks every
// segment up before encoding, so both occurrences miss; the ids must still equal the uncached
// encoder's, and a warm prompt's ids are allocated at their exact length.
func TestSegmentCacheRepeatedInPrompt(t *testing.T) {
	tok, err := Load(testModelPath)
	if err != nil {
		t.Fatal(err)
	}
	c := NewSegmentCache(1 << 20)
	tok.SetSegmentCache(c)
	doc := strings.Repeat("The same retrieved chunk about KV cache routing, quoted twice. ", 3)
	other := strings.Repeat("A different chunk between the two copies of the first one. ", 3)
	prompt := "<|im_start|>user\n" + doc + "<|im_end|>\n<|im_start|>user\n" + other + "<|im_end|>\n<|im_start|>user\n" + doc + "<|im_end|>\n<|im_start|>user\n" + doc
	want := loadTest(t).Encode(prompt)
	for pass := 0; pass < 2; pass++ {
		got := tok.Encode(prompt)
		if !slices.Equal(got, want) {
			t.Fatalf("pass %d: ids differ from the uncached encoder", pass)
		}
	}
	// pass 0: the three "user\n"+doc segments and the other one miss; pass 1: all four hit.
	if st := c.Stats(); st.Misses != 4 || st.Hits != 4 || st.Entries != 2 {
		t.Errorf("stats %+v, want 4 misses, 4 hits, 2 entries", st)
	}
	// Warm: one allocation, of the exact length (the short segments are "\n", one id each,
	// estimated at (len+2)/3 ids).
	var got []uint32
	if a := testing.AllocsPerRun(10, func() { got = tok.Encode(prompt) }); a != 1 {
		t.Errorf("warm prompt: %v allocations per Encode, want 1", a)
	}
	if cap(got) != len(got) {
		t.Errorf("warm prompt: cap %d for %d ids, want the exact length", cap(got), len(got))
	}
}
