package tokenizer

import (
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync/atomic"
)

// wordCache memoizes the ids of short pre-tokens (at most maxCachedWordLen bytes). BPE of a
// pre-token depends on nothing but its bytes (models/bpe/model.rs in Hugging Face tokenizers
// 0.23 keeps the same per-word cache), so a hit returns exactly what bpe would.
//
// It is an open-addressing hash table (linear probing) of slots holding pointers to immutable
// entries, written with compare-and-swap and read with plain atomic loads: a hit is a hash, one
// or two slot loads and a compare of the hashed words, with no lock and no write to memory
// shared between cores (the RWMutex reader count of the map it replaces was a cache line that
// both parallel chunks of a long segment wrote on every pre-token). A table takes entries up to
// half its slots (so probe sequences stay short and always reach an empty slot); then the next
// put publishes a table of twice the slots holding the same entries, from minWordSlots up to
// wordSlots (maxCacheEntries entries), so the slots the garbage collector scans follow the words
// seen. When the largest table is full the next put starts an empty one, as the map was emptied
// before. Entries are never evicted one by one, so a word stays cached for its table's lifetime
// (a direct-mapped table that overwrote colliding words was tried and lost to the map). A put
// racing with a growth may land in the table being replaced and be lost: a later miss, never a
// wrong id.
//
// Memory: at most one table in use plus, briefly, tables still read by encodes that loaded
// them before a growth or reset. The largest table is 8·wordSlots bytes of slots (512 KiB)
// plus at most maxCacheEntries entries of at most 80 (the entry) + 4·maxCachedWordLen (its ids)
// + maxCachedWordLen (its text, kept for words over 16 bytes) bytes; 80 bytes for a word of
// prose that is one token: under 11 MiB in the worst case, TestWordCacheBounded measures it on
// the live heap.
type wordCache struct {
	tab atomic.Pointer[wordTable]
}

const (
	maxCacheEntries  = 1 << 15
	maxCachedWordLen = 48
	wordSlots        = 2 * maxCacheEntries // slots of the largest table, a power of two
	minWordSlots     = 1 << 10             // slots of a new table, a power of two
)

type wordTable struct {
	n     atomic.Int32 // entries, plus puts counted that lost a race
	mask  uint64       // len(slots) - 1
	slots []atomic.Pointer[wordEntry]
}

func newWordTable(slots int) *wordTable {
	return &wordTable{mask: uint64(slots - 1), slots: make([]atomic.Pointer[wordEntry], slots)}
}

// grown returns a table of twice tab's slots holding tab's entries (not yet published, so
// plain stores; its readers see it through the cache's atomic pointer).
func (tab *wordTable) grown() *wordTable {
	g := newWordTable(2 * len(tab.slots))
	n := int32(0)
	for i := range tab.slots {
		e := tab.slots[i].Load()
		if e == nil {
			continue
		}
		j := e.hash & g.mask
		for g.slots[j].Load() != nil {
			j = (j + 1) & g.mask
		}
		g.slots[j].Store(e)
		n++
	}
	g.n.Store(n)
	return g
}

// wordEntry is one cached word; immutable once published.
type wordEntry struct {
	key  wordKey
	hash uint64
	id0  uint32   // the word's id when it is one token (ids nil)
	ids  []uint32 // the word's ids when more than one
	long string   // the word, when longer than 16 bytes (key does not determine it)
}

// wordKey is what wordHash reads of a word: its length and two words of its bytes. For a word
// of up to 16 bytes they hold every byte (the ranges read overlap and cover it), so a cache hit
// is decided by comparing them, without reading the word again; a longer word is compared too.
type wordKey struct {
	a, b uint64
	n    int
}

// wordKeys seed the cache's hash: random per process, so that no input can be crafted to
// collide (a long probe sequence would slow every lookup of the words in it).
var wordKeys = [4]uint64{rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64()}

// wordHash returns w's key and the hash a lookup and a put of w use: the wyhash construction of
// the Go runtime's memhashFallback (runtime/hash64.go, Go 1.27; the map hash of machines
// without AES), keyed by wordKeys. It is inlined arithmetic on one or two eight-byte loads for a
// word of up to 16 bytes, where hash/maphash (AES) costs a call and a fixed setup that dominated
// a cache hit.
func wordHash(w string) (wordKey, uint64) {
	var a, b uint64
	seed := wordKeys[0]
	n := len(w)
	switch {
	case n == 0:
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
	return wordKey{a, b, n}, wyMix(0x1d8e4e27c47d124f^uint64(n), wyMix(a^wordKeys[1], b^seed))
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
func (c *wordCache) reset() { c.tab.Store(newWordTable(minWordSlots)) }

// is reports whether e is the entry of the word w with key k and hash h.
func (e *wordEntry) is(w string, k wordKey, h uint64) bool {
	return e.hash == h && e.key == k && (k.n <= 16 || e.long == w)
}

// get returns the entry of w (k, h = wordHash(w)), or nil.
func (c *wordCache) get(w string, k wordKey, h uint64) *wordEntry {
	tab := c.tab.Load()
	for i := h & tab.mask; ; i = (i + 1) & tab.mask {
		e := tab.slots[i].Load()
		if e == nil || e.is(w, k, h) {
			return e
		}
	}
}

// put stores w's ids (at least one; k, h = wordHash(w)), copied.
func (c *wordCache) put(w string, k wordKey, h uint64, ids []uint32) {
	e := &wordEntry{key: k, hash: h, id0: ids[0]}
	if len(ids) > 1 {
		e.ids = append([]uint32(nil), ids...)
	}
	if k.n > 16 {
		e.long = strings.Clone(w) // do not retain the caller's (possibly large) text
	}
	for {
		tab := c.tab.Load()
		if int(tab.n.Add(1)) > len(tab.slots)/2 {
			// Half full: publish a larger table, or an empty one after the largest (one of
			// the racing goroutines wins; the others retry on the winner's table). Encodes
			// holding the old one finish on it.
			next := newWordTable(minWordSlots)
			if len(tab.slots) < wordSlots {
				next = tab.grown()
			}
			c.tab.CompareAndSwap(tab, next)
			continue
		}
		// At most len(slots)/2 puts reach this point per table, so at least half its slots
		// are empty and the probe ends.
		for i := h & tab.mask; ; i = (i + 1) & tab.mask {
			cur := tab.slots[i].Load()
			if cur == nil {
				if tab.slots[i].CompareAndSwap(nil, e) {
					return
				}
				cur = tab.slots[i].Load() // another put took the slot
			}
			if cur.is(w, k, h) {
				return // the same word, put concurrently
			}
		}
	}
}

// appendIDs appends e's ids to dst.
func (e *wordEntry) appendIDs(dst []uint32) []uint32 {
	if e.ids == nil {
		return append(dst, e.id0)
	}
	return append(dst, e.ids...)
}
