package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestASCIIClass checks the scanners' byte table against classOf, and that no pattern mask
// can match the non-ASCII marker.
func TestASCIIClass(t *testing.T) {
	initClasses()
	for b := range 256 {
		want := clsNonASCII
		if b < 0x80 {
			want = classOf(rune(b))
		}
		if asciiClass[b] != want {
			t.Errorf("asciiClass[%#x] = %#x, want %#x", b, asciiClass[b], want)
		}
	}
	if (clsLetter|clsMark|clsNumber|clsSpace|clsCRLF|clsPunct|clsSymbol)&clsNonASCII != 0 {
		t.Error("clsNonASCII overlaps a character class")
	}
	if asciiClass['a'] != clsLetter || asciiClass[' '] != clsSpace || asciiClass['\n'] != clsSpace|clsCRLF || asciiClass['7'] != clsNumber {
		t.Error("asciiClass misclassifies a, space, newline or 7")
	}
}

// randomWords returns n distinct words of 2..maxLen bytes: ASCII letters, digits, punctuation,
// and multi-byte characters, so that every wordHash length branch and BPE of several ids runs.
func randomWords(seed uint64, n, maxLen int) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	alphabet := []string{"a", "e", "t", "q", "Z", "0", "9", "'", "-", " ", "é", "中", "😀", "\x80"}
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		var b strings.Builder
		size := 2 + r.IntN(maxLen-1)
		for b.Len() < size {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		w := b.String()[:size] // may cut a character: invalid UTF-8 is a word too
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// TestWordCacheExact encodes words through the cache (a miss, then a hit) and compares with BPE
// without the cache, for every word length up to maxCachedWordLen and beyond.
func TestWordCacheExact(t *testing.T) {
	tok := loadTest(t)
	for _, w := range randomWords(7, 3000, maxCachedWordLen+8) {
		want := tok.bpe(nil, w)
		for pass := range 2 {
			if got := tok.encodeWord(nil, w); len(w) > 1 && !slices.Equal(got, want) {
				t.Fatalf("%q (pass %d): %v, want %v", w, pass, got, want)
			}
		}
	}
}

// TestWordCacheCollisions stores words under one hash value: each keeps its own ids (the
// probe sequence compares keys, and for words over 16 bytes that share their key the text), and
// a word not stored misses.
func TestWordCacheCollisions(t *testing.T) {
	var c wordCache
	c.reset()
	const h = 12345
	word := func(i int) string { // short words, and long ones that share their last 16 bytes
		if i%2 == 0 {
			return fmt.Sprintf("w%d", i)
		}
		return fmt.Sprintf("%d", i) + strings.Repeat("z", 20)
	}
	for i := range 100 {
		w := word(i)
		k, _ := wordHash(w)
		c.put(w, k, h, []uint32{uint32(i), uint32(i) + 1}[:1+i%2])
	}
	k7, _ := wordHash(word(7))
	c.put(word(7), k7, h, []uint32{99}) // a second put of a word keeps the first
	for i := range 100 {
		w := word(i)
		k, _ := wordHash(w)
		e := c.get(w, k, h)
		if e == nil || !slices.Equal(e.appendIDs(nil), []uint32{uint32(i), uint32(i) + 1}[:1+i%2]) {
			t.Fatalf("%q: %v", w, e)
		}
	}
	for _, w := range []string{"w100", "101" + strings.Repeat("z", 20)} {
		if k, _ := wordHash(w); c.get(w, k, h) != nil {
			t.Errorf("%q was never stored but hits", w)
		}
	}
}

// TestWordCacheConcurrent encodes overlapping word sets from several goroutines, more distinct
// words than one table holds (so tables are replaced while others read them), each result
// compared with BPE without the cache. Run under -race it checks the publication of entries.
func TestWordCacheConcurrent(t *testing.T) {
	tok := loadTest(t)
	words := randomWords(11, maxCacheEntries+maxCacheEntries/2, 24)
	if raceEnabled {
		words = words[:maxCacheEntries+4000]
	}
	want := make([][]uint32, len(words))
	for i, w := range words {
		want[i] = tok.bpe(nil, w)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range len(words) {
				i := (k + g*len(words)/8) % len(words) // overlapping, shifted orders
				if got := tok.encodeWord(nil, words[i]); !slices.Equal(got, want[i]) {
					t.Errorf("%q: %v, want %v", words[i], got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := tableEntries(tok.cache.tab.Load()); n > maxCacheEntries {
		t.Errorf("table holds %d entries, more than %d", n, maxCacheEntries)
	}
}

func tableEntries(tab *wordTable) int {
	n := 0
	for i := range tab.slots {
		if tab.slots[i].meta.Load()&3 == slotReady {
			n++
		}
	}
	return n
}

// TestWordCacheBounded puts 4·maxCacheEntries distinct worst-case words (maxCachedWordLen
// bytes, one id per byte) and measures the live heap after runtime.GC() every half table: it
// stays under wordCacheBound (the largest table's slots and maxCacheEntries wordExt of 48 + 192
// + 48 bytes, their allocation size classes), i.e. replaced tables are freed and the cache does not grow
// with the number of words seen.
func TestWordCacheBounded(t *testing.T) {
	const wordCacheBound = 32*wordSlots + maxCacheEntries*(48+192+48) + 512<<10 // + test slack
	var c wordCache
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c.reset()
	ids := make([]uint32, maxCachedWordLen)
	key := []byte(strings.Repeat("x", maxCachedWordLen))
	peak := uint64(0)
	for i := range 4 * maxCacheEntries {
		copy(key, fmt.Sprintf("%08d", i))
		w := string(key)
		k, h := wordHash(w)
		c.put(w, k, h, ids)
		if (i+1)%(maxCacheEntries/2) == 0 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			live := m.HeapAlloc - min(m.HeapAlloc, before.HeapAlloc)
			peak = max(peak, live)
			if live > wordCacheBound {
				t.Fatalf("after %d words: live heap %d bytes, bound %d", i+1, live, wordCacheBound)
			}
		}
	}
	if n := tableEntries(c.tab.Load()); n == 0 || n > maxCacheEntries {
		t.Errorf("table holds %d entries, want 1..%d", n, maxCacheEntries)
	}
	t.Logf("peak live heap %.1f MiB (bound %.1f MiB)", float64(peak)/(1<<20), float64(wordCacheBound)/(1<<20))
	runtime.KeepAlive(&c)
}

// TestWordCacheGrows puts words one by one: every word put is found after the table grew from
// minWordSlots to wordSlots, and after maxCacheEntries words the next put starts a small empty
// table again.
func TestWordCacheGrows(t *testing.T) {
	var c wordCache
	c.reset()
	word := func(i int) string { return fmt.Sprintf("word%d", i) }
	sizes := []int{len(c.tab.Load().slots)}
	for i := range maxCacheEntries {
		w := word(i)
		k, h := wordHash(w)
		c.put(w, k, h, []uint32{uint32(i)})
		if n := len(c.tab.Load().slots); n != sizes[len(sizes)-1] {
			sizes = append(sizes, n)
		}
	}
	want := []int{}
	for n := minWordSlots; n <= wordSlots; n *= 2 {
		want = append(want, n)
	}
	if !slices.Equal(sizes, want) {
		t.Errorf("table sizes %v, want %v", sizes, want)
	}
	for i := range maxCacheEntries {
		w := word(i)
		k, h := wordHash(w)
		if e := c.get(w, k, h); e == nil || !slices.Equal(e.appendIDs(nil), []uint32{uint32(i)}) {
			t.Fatalf("%q lost after growing: %v", w, e)
		}
	}
	w := word(maxCacheEntries)
	k, h := wordHash(w)
	c.put(w, k, h, []uint32{1})
	if tab := c.tab.Load(); len(tab.slots) != minWordSlots || tableEntries(tab) != 1 {
		t.Errorf("after %d words: %d slots, %d entries; want a new table of %d slots with the last word", maxCacheEntries+1, len(tab.slots), tableEntries(tab), minWordSlots)
	}
}

// TestASCIILettersEnd compares the eight-bytes-at-a-time letter run with the byte loop over
// asciiClass, for every byte value at every position of a run (both cases of letters around it,
// several starts and string lengths), and checks that the ASCII letters are the same bytes for
// both letters masks of the scanner.
func TestASCIILettersEnd(t *testing.T) {
	for b := range 128 {
		for _, mask := range []uint8{clsLetter, clsLetter | clsMark} {
			if (asciiClass[b]&mask != 0) != isASCIILetter(byte(b)) {
				t.Errorf("byte %#x: letters mask %#x disagrees with [A-Za-z]", b, mask)
			}
		}
	}
	ref := func(s string, j int) int {
		for j < len(s) && asciiClass[s[j]]&clsLetter != 0 {
			j++
		}
		return j
	}
	base := []byte("aZbYcXdWeVfUgTsS")
	for b := range 256 {
		for pos := range len(base) {
			s := slices.Clone(base)
			s[pos] = byte(b)
			for n := pos + 1; n <= len(s); n += 3 {
				for j := range min(4, n) {
					if got, want := asciiLettersEnd(string(s[:n]), j), ref(string(s[:n]), j); got != want {
						t.Fatalf("%q from %d: %d, want %d", s[:n], j, got, want)
					}
				}
			}
		}
	}
}
