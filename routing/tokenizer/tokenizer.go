package tokenizer

import (
	"strings"
)

// Tokenizer encodes text to Qwen-style byte-level BPE token ids. Build it with
// Load; it is safe for concurrent use.
type Tokenizer struct {
	vocab   map[string]uint32 // byte-level token text (e.g. "Ġworld") → id
	merges  map[uint64]merge  // pairKey(left, right) → rank and result
	rankIDs []uint32          // merge rank → result id
	byteIDs [256]uint32       // id of the one-byte token of each byte
	decode  []string          // id → raw bytes (added tokens: their content)
	known   []bool            // id → whether decode[id] is defined
	added   addedTokens
	cache   wordCache
	segs    *SegmentCache // nil: no segment cache (segcache.go)
}

// addedTokens finds added tokens in raw text, leftmost-longest.
type addedTokens struct {
	byContent map[string]uint32
	byFirst   [256][]string // tokens by first byte, longest first
	first     []byte        // the distinct first bytes
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
		for _, tok := range a.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], tok) {
				return i, i + len(tok), a.byContent[tok]
			}
		}
		i++
	}
	return -1, -1, 0
}

// Encode returns the token ids of text, equal to Hugging Face tokenizers'
// encode(text, add_special_tokens=False) for the loaded tokenizer.json: added
// tokens split out of the raw text first (leftmost-longest, one id each),
// NFC per remaining segment, the Qwen split regex, byte-level BPE. Time is
// O(n log n) in len(text). Invalid UTF-8 bytes are kept and encoded by their
// byte values. An empty text gives an empty (non-nil) slice.
func (t *Tokenizer) Encode(text string) []uint32 {
	ids := make([]uint32, 0, len(text)/3+4)
	for len(text) > 0 {
		start, end, id := -1, -1, uint32(0)
		if len(t.added.first) > 0 {
			start, end, id = t.added.find(text)
		}
		if start < 0 {
			return t.encodeSegmentCached(ids, text)
		}
		ids = t.encodeSegmentCached(ids, text[:start])
		ids = append(ids, id)
		text = text[end:]
	}
	return ids
}

// encodeSegment appends the ids of a text without added tokens.
func (t *Tokenizer) encodeSegment(dst []uint32, seg string) []uint32 {
	if seg == "" {
		return dst
	}
	seg = nfc(seg)
	for i := 0; i < len(seg); {
		j := nextPreToken(seg, i)
		dst = t.encodeWord(dst, seg[i:j])
		i = j
	}
	return dst
}

// encodeWord appends the ids of one pre-token.
func (t *Tokenizer) encodeWord(dst []uint32, w string) []uint32 {
	if len(w) == 1 {
		return append(dst, t.byteIDs[w[0]])
	}
	if len(w) > maxCachedWordLen {
		return t.bpe(dst, w)
	}
	if ids, ok := t.cache.get(w); ok {
		return append(dst, ids...)
	}
	n := len(dst)
	dst = t.bpe(dst, w)
	t.cache.put(w, dst[n:])
	return dst
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

// TokenID returns the id of an added token's content (e.g. "<|video_pad|>")
// or of a vocabulary token in its byte-level spelling (e.g. "Ġworld").
func (t *Tokenizer) TokenID(s string) (uint32, bool) {
	if id, ok := t.added.byContent[s]; ok {
		return id, true
	}
	id, ok := t.vocab[s]
	return id, ok
}

// VocabSize returns one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.known) }
