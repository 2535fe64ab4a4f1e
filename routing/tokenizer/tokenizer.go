package tokenizer

import (
	"sort"
	"strings"
	"sync/atomic"
)

// Tokenizer encodes text to BPE token ids. Build it with Load; it is safe
// for concurrent use.
type Tokenizer struct {
	id           uint64            // this load's identity (notes name the tokenizer by it, not by pointer)
	vocab        map[string]uint32 // token text as spelled in tokenizer.json (e.g. "Ġworld", "▁world") → id
	rawVocab     map[string]uint32 // byte-level vocab by raw bytes (ignore_merges only)
	merges       map[uint64]merge  // pairKey(left, right) → rank and result
	rankIDs      []uint32          // merge rank → result id
	byteIDs      [256]uint32       // id of each byte as a one-byte word
	byteFallback [256]uint32       // character level: id of <0xXX>
	decode       []string          // id → raw bytes (added tokens: their content)
	known        []bool            // id → whether decode[id] is defined
	byContent    map[string]uint32 // every added token's content → id
	added        addedTokens       // added tokens with normalized false, matched in the raw text
	addedNorm    addedTokens       // added tokens with normalized true, matched after the normalizer
	norm         normalizer        // nil: none
	fast         uint8             // non-zero: the Qwen scanner's letters mask (fast path)
	fastDigits   int               // the scanner's longest \p{N} run
	fastO200k    bool              // gpt-oss's o200k split on its scanner (fast path)
	fastDeepseek bool              // DeepSeek-V3's three splits on their scanner (fast path)
	stages       []stage           // general path pre-tokenizers, in order
	byteLevel    bool              // GPT-2 byte-level alphabet, else characters with byte fallback
	ignoreMerges bool              // a pre-token that is a vocabulary token is that token
	cache        wordCache
	segs         *SegmentCache  // nil: no segment cache (segcache.go)
	post         *PostProcessor // tokenizer.json's post_processor (postprocess.go)
	maxWord      int            // word bound in bytes, 0 for none (bound.go)
	// tooCostlyWords counts pre-tokens over maxWord (bound.go)
	tooCostlyWords atomic.Uint64
}

// addedTokens finds added tokens in text, leftmost-longest.
type addedTokens struct {
	byContent map[string]uint32
	byFirst   [256][]addedCand // tokens by first byte, longest first
	first     []byte           // the distinct first bytes
	maxLen    int              // the longest token, in bytes
}

// addedCand is one added token with its first eight bytes as a little-endian word (and the
// mask of the bytes it has), so that a position is tested with one compare per token before
// the byte comparison: prompts with code or markup hold many '<' and every Qwen added token
// starts with one.
type addedCand struct {
	tok     string
	id      uint32
	w, mask uint64
}

// add indexes one token (the first of a content wins).
func (a *addedTokens) add(content string, id uint32) {
	if a.byContent == nil {
		a.byContent = make(map[string]uint32)
	}
	if _, dup := a.byContent[content]; dup {
		return
	}
	a.byContent[content] = id
	a.maxLen = max(a.maxLen, len(content))
	b := content[0]
	if len(a.byFirst[b]) == 0 {
		a.first = append(a.first, b)
	}
	w, mask := prefixWord(content)
	a.byFirst[b] = append(a.byFirst[b], addedCand{tok: content, id: id, w: w, mask: mask})
}

// prefixWord is the first (up to) eight bytes of s as a little-endian word, and the mask of
// the bytes present.
func prefixWord(s string) (w, mask uint64) {
	for i := 0; i < len(s) && i < 8; i++ {
		w |= uint64(s[i]) << (8 * i)
		mask |= 0xff << (8 * i)
	}
	return w, mask
}

// sort orders each first-byte list longest first.
func (a *addedTokens) sort() {
	for b := range a.byFirst {
		toks := a.byFirst[b]
		sort.SliceStable(toks, func(i, j int) bool { return len(toks[i].tok) > len(toks[j].tok) })
	}
}

// find returns the leftmost, then longest added token in s as s[start:end]
// with its id, or start = -1.
func (a *addedTokens) find(s string) (start, end int, id uint32) {
	for i := 0; i < len(s); {
		if len(a.first) == 1 {
			k := strings.IndexByte(s[i:], a.first[0])
			if k < 0 {
				return -1, -1, 0
			}
			i += k
		} else if len(a.byFirst[s[i]]) == 0 {
			i++
			continue
		}
		var w uint64
		if i+8 <= len(s) { // one 8-byte load (the compiler combines these)
			w = uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		} else {
			w, _ = prefixWord(s[i:])
		}
		for _, c := range a.byFirst[s[i]] {
			if w&c.mask == c.w && strings.HasPrefix(s[i:], c.tok) {
				return i, i + len(c.tok), c.id
			}
		}
		i++
	}
	return -1, -1, 0
}

// Encode returns the token ids of text, equal to Hugging Face tokenizers'
// encode(text, add_special_tokens=False) for the loaded tokenizer.json:
// added tokens with normalized false split out of the raw text first
// (leftmost-longest, one id each), the normalizer per remaining segment,
// added tokens with normalized true split out of the normalized segment,
// the pre-tokenizer (the Qwen scanner on the fast path, else the Split,
// ByteLevel and Metaspace stages in order), BPE per pre-token. Time is
// O(n log n) in len(text) on the fast path. Invalid UTF-8 bytes are kept and
// encoded by their byte values. An empty text gives an empty (non-nil)
// slice.
func (t *Tokenizer) Encode(text string) []uint32 {
	if t.segs != nil {
		return t.encodeWithSegments(text)
	}
	ids := make([]uint32, 0, len(text)/3+4)
	first := true
	for len(text) > 0 {
		start, end, id := -1, -1, uint32(0)
		if len(t.added.first) > 0 {
			start, end, id = t.added.find(text)
		}
		if start < 0 {
			return t.encodeSegmentAuto(ids, text, first)
		}
		ids = t.encodeSegmentAuto(ids, text[:start], first && start > 0)
		ids = append(ids, id)
		text = text[end:]
		first = false
	}
	return ids
}

// encodeSegment appends the ids of a text without non-normalized added
// tokens; first says it starts the text.
func (t *Tokenizer) encodeSegment(dst []uint32, seg string, first bool) []uint32 {
	if seg == "" {
		return dst
	}
	if t.norm != nil {
		seg = t.norm(seg)
	}
	for len(seg) > 0 && len(t.addedNorm.first) > 0 {
		start, end, id := t.addedNorm.find(seg)
		if start < 0 {
			break
		}
		dst = t.preTokenize(dst, seg[:start], first && start > 0)
		dst = append(dst, id)
		seg = seg[end:]
		first = false
	}
	return t.preTokenize(dst, seg, first)
}

// preTokenize appends the ids of a normalized text without added tokens.
func (t *Tokenizer) preTokenize(dst []uint32, seg string, first bool) []uint32 {
	if seg == "" {
		return dst
	}
	if t.fast != 0 {
		dst, _ = t.encodeRun(dst, seg, 0, len(seg))
		return dst
	}
	if t.fastO200k {
		for i := 0; i < len(seg); {
			j := nextPreTokenO200k(seg, i)
			dst = t.encodeWord(dst, seg[i:j])
			i = j
		}
		return dst
	}
	if t.fastDeepseek {
		return t.preTokenizeDeepseek(dst, seg)
	}
	return t.preTokenizeStages(dst, seg, first)
}

// preTokenizeDeepseek and preTokenizeStages are preTokenize's paths whose closures capture dst;
// kept apart so that the scanner paths above do not move dst to the heap on every call (one
// allocation per segment, paid by every short segment of a chat prompt).
func (t *Tokenizer) preTokenizeDeepseek(dst []uint32, seg string) []uint32 {
	deepseekPreTokens(seg, func(w string) { dst = t.encodeWord(dst, w) })
	return dst
}

func (t *Tokenizer) preTokenizeStages(dst []uint32, seg string, first bool) []uint32 {
	// emit[k] feeds a piece to stage k; the last one encodes it.
	emit := make([]func(piece), len(t.stages)+1)
	emit[len(t.stages)] = func(p piece) {
		if p.s != "" {
			dst = t.encodeWord(dst, p.s)
		}
	}
	for k := len(t.stages) - 1; k >= 0; k-- {
		st, next := t.stages[k], emit[k+1]
		emit[k] = func(p piece) { st.split(p, next) }
	}
	emit[0](piece{s: seg, first: first})
	return dst
}

// encodeRun appends the ids of the pre-tokens of seg (Qwen scanner fast path) from position i
// on, until a pre-token ends at or after to, and returns where it ended. It is the loop
// "nextPreToken, encodeWord" with their commonest case inlined: an ASCII word, alone or after
// one space, found in the word cache (the loop of a long document in prose runs no call per
// pre-token). The inlined scan is nextPreToken's first shortcut (a run of letters from an ASCII
// letter, or from a space followed by one, is \p{L}+ or [^\r\n\p{L}\p{N}]?\p{L}+) taken only
// when the run ends on an ASCII byte or the end of seg (else the run may go on into non-ASCII
// letters, which nextPreToken decodes); the inlined lookup is encodeWord's (a word of at least
// two and at most maxCachedWordLen bytes, whose ids are then those of the cache). Every other case goes through nextPreToken and encodeWord.
func (t *Tokenizer) encodeRun(dst []uint32, seg string, i, to int) ([]uint32, int) {
	letters := t.fast
	for i < to {
		j := i
		if seg[j] == ' ' && j+1 < len(seg) {
			j++
		}
		if asciiClass[seg[j]]&letters != 0 {
			j = asciiLettersEnd(seg, j+1)
			if j-i > 1 && j-i <= maxCachedWordLen && (j == len(seg) || asciiClass[seg[j]] != clsNonASCII) {
				w := seg[i:j]
				k, h := wordHash(w)
				if e := t.cache.get(w, k, h); e != nil {
					dst = e.appendIDs(dst)
					i = j
					continue
				}
			}
		}
		j = nextPreToken(seg, i, letters, t.fastDigits)
		dst = t.encodeWord(dst, seg[i:j])
		i = j
	}
	return dst, i
}

// encodeWord appends the ids of one pre-token: its byte's id for one byte, else the word
// cache's ids, else wordIDs (stored in the cache for a word of at most maxCachedWordLen bytes).
func (t *Tokenizer) encodeWord(dst []uint32, w string) []uint32 {
	if len(w) == 1 {
		return append(dst, t.byteIDs[w[0]])
	}
	if len(w) > maxCachedWordLen {
		if t.tooLong(w) {
			return append(dst, TooCostlyID) // not merged: bound.go
		}
		return t.wordIDs(dst, w)
	}
	k, h := wordHash(w)
	if s := t.cache.get(w, k, h); s != nil {
		return s.appendIDs(dst)
	}
	n := len(dst)
	dst = t.wordIDs(dst, w)
	t.cache.put(w, k, h, dst[n:])
	return dst
}

// wordIDs appends the ids of a pre-token of at least two bytes: with ignore_merges (Hugging Face
// BPE::tokenize_with_cache, models/bpe/model.rs) the vocabulary id of a pre-token that is a
// vocabulary token, else BPE. It depends on w alone, so the word cache may hold its result.
func (t *Tokenizer) wordIDs(dst []uint32, w string) []uint32 {
	if t.ignoreMerges {
		if id, ok := t.wordID(w); ok {
			return append(dst, id)
		}
	}
	return t.bpe(dst, w)
}

// Decode returns the text of ids: the byte-level inverse for vocabulary
// tokens, the content for added tokens (Hugging Face decode with
// skip_special_tokens=False). Unknown ids are skipped, as Hugging Face does.
// The result can be invalid UTF-8 when ids split a character; no replacement
// characters are inserted.
func (t *Tokenizer) Decode(ids []uint32) string {
	var b strings.Builder
	for _, id := range ids {
		if int(id) < len(t.known) && t.known[id] {
			b.WriteString(t.decode[id])
		}
	}
	return b.String()
}

// wordID returns the vocabulary id of a whole pre-token (ignore_merges).
func (t *Tokenizer) wordID(w string) (uint32, bool) {
	if t.byteLevel {
		id, ok := t.rawVocab[w]
		return id, ok
	}
	id, ok := t.vocab[w]
	return id, ok
}

// TokenID returns the id of an added token's content (e.g. "<|video_pad|>")
// or of a vocabulary token in its byte-level spelling (e.g. "Ġworld").
func (t *Tokenizer) TokenID(s string) (uint32, bool) {
	if id, ok := t.byContent[s]; ok {
		return id, true
	}
	id, ok := t.vocab[s]
	return id, ok
}

// VocabSize returns one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.known) }
