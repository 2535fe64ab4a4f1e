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
// It is an open-addressing hash table (linear probing) of slots written once each and read
// without locks: a put claims an empty slot by compare-and-swap on its state, fills it and
// publishes it with an atomic store; a reader loads the state and reads the fields only of a
// published slot (the store/load pair orders the writes before the reads), and a slot is never
// written again. A slot holds the hashed words of its word (wordKey) and its id when it is one
// token, so a hit is a hash, one or two slot loads and a compare of a few words, with no lock,
// no pointer to follow and no write to memory shared between cores (the RWMutex reader count of
// the map it replaces was a cache line that both parallel chunks of a long segment wrote on
// every pre-token). A table takes entries up to half its slots (so probe sequences stay short
// and always reach an empty slot); then the next put publishes a table of twice the slots
// holding the same entries, from minWordSlots up to wordSlots (maxCacheEntries entries), so the
// memory and what the garbage collector scans follow the words seen. When the largest table is
// full the next put starts an empty one, as the map was emptied before. Entries are never
// evicted one by one, so a word stays cached for its table's lifetime (a direct-mapped table
// that overwrote colliding words was tried and lost to the map). A put racing with a growth may
// land in the table being replaced and be lost, and a word read while its slot is being written
// is a miss (put again, in another slot): a later miss or a duplicate, never a wrong id.
//
// Memory: at most one table in use plus, briefly, tables still read by encodes that loaded
// them before a growth or reset. The largest table is 32·wordSlots bytes of slots (2 MiB) plus,
// for at most maxCacheEntries words of several ids or more than 16 bytes, a wordExt of at most
// 48 + 4·maxCachedWordLen (its ids) + maxCachedWordLen (its text) bytes; a word of prose that
// is one token needs only its slot: under 12 MiB in the worst case, TestWordCacheBounded
// measures it on the live heap.
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
	n     atomic.Int32 // claimed slots, plus puts counted that lost a race
	mask  uint64       // len(slots) - 1
	slots []wordSlot
}

// Slot states, the low two bits of wordSlot.meta.
const (
	slotEmpty   = 0
	slotWriting = 1 // claimed by a put, fields not yet valid
	slotReady   = 2 // fields valid and immutable
)

// wordSlot is one cached word, 32 bytes (two to a cache line).
type wordSlot struct {
	meta atomic.Uint64 // id0<<32 | n<<8 | state: the word's first id, its length (wordKey.n), the slot state
	a, b uint64        // wordKey.a, wordKey.b
	ext  *wordExt      // nil for a word of one id and at most 16 bytes
}

// wordExt holds what a slot has no room for.
type wordExt struct {
	ids  []uint32 // the word's ids when more than one
	long string   // the word, when longer than 16 bytes (its key does not determine it)
}

func newWordTable(slots int) *wordTable {
	return &wordTable{mask: uint64(slots - 1), slots: make([]wordSlot, slots)}
}

// grown returns a table of twice tab's slots holding tab's published entries (not yet
// published itself; its readers see it through the cache's atomic pointer).
func (tab *wordTable) grown() *wordTable {
	g := newWordTable(2 * len(tab.slots))
	n := int32(0)
	for i := range tab.slots {
		s := &tab.slots[i]
		m := s.meta.Load()
		if m&3 != slotReady {
			continue
		}
		var h uint64
		if k := (wordKey{s.a, s.b, int(uint8(m >> 8))}); k.n <= 16 {
			h = keyHash(k, wordKeys[0])
		} else {
			_, h = wordHash(s.ext.long)
		}
		j := h & g.mask
		for g.slots[j].meta.Load() != slotEmpty {
			j = (j + 1) & g.mask
		}
		d := &g.slots[j]
		d.a, d.b, d.ext = s.a, s.b, s.ext
		d.meta.Store(m)
		n++
	}
	g.n.Store(n)
	return g
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

// wordHash returns w's key and the hash a lookup and a put of w use: the wyhash construction
// of the Go runtime's memHashFallback (internal/runtime/maps/runtime_hash64.go, Go 1.27; the
// map hash of machines without AES), keyed by wordKeys. It is inlined arithmetic on one or two
// eight-byte loads for a word of up to 16 bytes, where hash/maphash (AES) costs a call and a
// fixed setup that dominated a cache hit.
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
	k := wordKey{a, b, n}
	return k, keyHash(k, seed)
}

// keyHash is wordHash's last step; seed is wordKeys[0] for a word of at most 16 bytes.
func keyHash(k wordKey, seed uint64) uint64 {
	return wyMix(0x1d8e4e27c47d124f^uint64(k.n), wyMix(k.a^wordKeys[1], k.b^seed))
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

// is reports whether s, a published slot whose meta is m, holds the word w with key k.
func (s *wordSlot) is(m uint64, w string, k wordKey) bool {
	return uint8(m>>8) == uint8(k.n) && s.a == k.a && s.b == k.b && (k.n <= 16 || s.ext.long == w)
}

// get returns the slot of w (k, h = wordHash(w)), or nil.
func (c *wordCache) get(w string, k wordKey, h uint64) *wordSlot {
	tab := c.tab.Load()
	for i := h & tab.mask; ; i = (i + 1) & tab.mask {
		s := &tab.slots[i]
		m := s.meta.Load()
		if m == slotEmpty {
			return nil
		}
		if m&3 == slotReady && s.is(m, w, k) {
			return s
		}
		// slotWriting: a put in progress, of this word or another: go on.
	}
}

// put stores w's ids (at least one; k, h = wordHash(w)), copied.
func (c *wordCache) put(w string, k wordKey, h uint64, ids []uint32) {
	var ext *wordExt
	if len(ids) > 1 || k.n > 16 {
		ext = new(wordExt)
		if len(ids) > 1 {
			ext.ids = append([]uint32(nil), ids...)
		}
		if k.n > 16 {
			ext.long = strings.Clone(w) // do not retain the caller's (possibly large) text
		}
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
			s := &tab.slots[i]
			m := s.meta.Load()
			if m == slotEmpty {
				if s.meta.CompareAndSwap(slotEmpty, slotWriting) {
					s.a, s.b, s.ext = k.a, k.b, ext
					s.meta.Store(uint64(ids[0])<<32 | uint64(k.n)<<8 | slotReady)
					return
				}
				m = s.meta.Load() // another put claimed the slot
			}
			if m&3 == slotReady && s.is(m, w, k) {
				return // the same word, put concurrently
			}
		}
	}
}

// appendIDs appends the ids of s's word to dst.
func (s *wordSlot) appendIDs(dst []uint32) []uint32 {
	if s.ext == nil || s.ext.ids == nil {
		return append(dst, uint32(s.meta.Load()>>32))
	}
	return append(dst, s.ext.ids...)
}
