package tokenizer

import (
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"unsafe"
)

// wordCache memoizes the ids of short pre-tokens (at most maxCachedWordLen bytes). BPE of a
// pre-token depends on nothing but its bytes (models/bpe/model.rs in Hugging Face tokenizers
// 0.23 keeps the same per-word cache), so a hit returns exactly what bpe would.
//
// It is an open-addressing hash table (linear probing) of wordSlots slots holding pointers to
// immutable entries, written with compare-and-swap and read with plain atomic loads: a hit is a
// hash, one or two slot loads and a string compare, with no lock and no write to memory shared
// between cores (the RWMutex reader count of the map it replaces was a cache line that both
// parallel chunks of a long segment wrote on every pre-token). A table takes at most
// maxCacheEntries entries (half its slots, so probe sequences stay short and always reach an
// empty slot); when it is full the next put starts an empty table, as the map was emptied before.
// Entries are never evicted one by one, so a word stays cached for the table's lifetime
// (a direct-mapped table that overwrote colliding words was tried and lost to the map).
//
// Memory: at most one table in use plus, briefly, tables still read by encodes that loaded
// them before a reset. A table is 8·wordSlots bytes of slots (512 KiB) plus at most
// maxCacheEntries entries of at most entryHeader + maxCachedWordLen + 4·maxCachedWordLen bytes
// (in practice 40–80 bytes for an English word): under 10 MiB in the worst case,
// TestWordCacheBounded measures it on the live heap.
type wordCache struct {
	tab atomic.Pointer[wordTable]
}

const (
	maxCacheEntries  = 1 << 15
	maxCachedWordLen = 48
	wordSlots        = 2 * maxCacheEntries // power of two
)

type wordTable struct {
	n     atomic.Int32 // puts counted against maxCacheEntries (including lost races)
	slots [wordSlots]atomic.Pointer[wordEntry]
}

// wordEntry is one cached word; immutable once published. key and ids share one allocation.
type wordEntry struct {
	hash uint64
	key  string
	ids  []uint32
}

// wordKeys seed the cache's hash: random per process, so that no input can be crafted to
// collide (a long probe sequence would slow every lookup of the words in it).
var wordKeys = [4]uint64{rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64()}

// wordHash is the hash a lookup and a put of w use: the wyhash construction of the Go
// runtime's memhashFallback (runtime/hash64.go, Go 1.27; the map hash of machines without AES),
// keyed by wordKeys. It is inlined arithmetic on one or two eight-byte loads for a word of up
// to 16 bytes, where hash/maphash (AES) costs a call and a fixed setup that dominated a cache
// hit. Longer words (never cached, see maxCachedWordLen) are not hashed.
func wordHash(w string) uint64 {
	var a, b uint64
	seed := wordKeys[0]
	n := len(w)
	switch {
	case n == 0:
		return seed
	case n < 4:
		a = uint64(w[0]) | uint64(w[n>>1])<<8 | uint64(w[n-1])<<16
	case n <= 8:
		a, b = le32(w, 0), le32(w, n-4)
	case n <= 16:
		a, b = le64(w, 0), le64(w, n-8)
	default:
		p := w
		for len(p) > 16 {
			seed = wyMix(le64(p, 0)^wordKeys[1], le64(p, 8)^seed)
			p = p[16:]
		}
		a, b = le64(w, n-16), le64(w, n-8)
	}
	return wyMix(0x1d8e4e27c47d124f^uint64(n), wyMix(a^wordKeys[1], b^seed))
}

func wyMix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// le32 and le64 read s[i:i+4] and s[i:i+8] little-endian (one load each after the
// compiler's load combining).
func le32(s string, i int) uint64 {
	s = s[i : i+4]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

func le64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// reset empties the cache (Load, and benchmarks of the cold path).
func (c *wordCache) reset() { c.tab.Store(new(wordTable)) }

// get returns the ids of w (shared: the caller must not modify them).
func (c *wordCache) get(w string, h uint64) ([]uint32, bool) {
	tab := c.tab.Load()
	for i := h & (wordSlots - 1); ; i = (i + 1) & (wordSlots - 1) {
		e := tab.slots[i].Load()
		if e == nil {
			return nil, false
		}
		if e.hash == h && e.key == w {
			return e.ids, true
		}
	}
}

// put stores a copy of w and ids (w not empty, h = wordHash(w)).
func (c *wordCache) put(w string, h uint64, ids []uint32) {
	e := newWordEntry(w, h, ids)
	for {
		tab := c.tab.Load()
		if tab.n.Add(1) > maxCacheEntries {
			// Full: start an empty table (one of the racing goroutines wins; the others retry
			// on the winner's table). Encodes holding the old one finish on it.
			c.tab.CompareAndSwap(tab, new(wordTable))
			continue
		}
		// At most maxCacheEntries puts reach this point per table, so at least half its
		// slots are empty and the probe ends.
		for i := h & (wordSlots - 1); ; i = (i + 1) & (wordSlots - 1) {
			cur := tab.slots[i].Load()
			if cur == nil {
				if tab.slots[i].CompareAndSwap(nil, e) {
					return
				}
				cur = tab.slots[i].Load() // another put took the slot
			}
			if cur.hash == h && cur.key == w {
				return // the same word, put concurrently
			}
		}
	}
}

// newWordEntry copies w and ids into one allocation: the ids, then the key's bytes (so a hit
// touches one or two cache lines after the entry, and the entry retains nothing of the
// caller's, possibly large, text).
func newWordEntry(w string, h uint64, ids []uint32) *wordEntry {
	buf := make([]uint32, len(ids)+(len(w)+3)/4)
	copy(buf, ids)
	kb := unsafe.Slice((*byte)(unsafe.Pointer(&buf[len(ids)])), len(w))
	copy(kb, w)
	return &wordEntry{hash: h, key: unsafe.String(&kb[0], len(w)), ids: buf[:len(ids):len(ids)]}
}
