package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// qwenSplitRegex is Qwen2/Qwen3's split pattern, the fast path of
// nextPreToken with letters = clsLetter.
const qwenSplitRegex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// qwen35SplitRegex is Qwen3.5's split pattern (letters and marks form one
// word), the fast path of nextPreToken with letters = clsLetter|clsMark.
const qwen35SplitRegex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// llama3SplitRegex is Llama 3's split pattern (Qwen2's with \p{N}{1,3}),
// the fast path with letters = clsLetter, digits = 3.
const llama3SplitRegex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// ErrUnsupported is wrapped by Load errors for tokenizer.json files whose
// shape this package does not implement.
var ErrUnsupported = errors.New("unsupported tokenizer.json")

type fileJSON struct {
	AddedTokens  []addedJSON `json:"added_tokens"`
	Normalizer   *normJSON   `json:"normalizer"`
	PreTokenizer *preTokJSON `json:"pre_tokenizer"`
	Decoder      *typedJSON  `json:"decoder"`
	Model        modelJSON   `json:"model"`
	// PostProcessor is what add_special_tokens=True adds (postprocess.go).
	PostProcessor json.RawMessage `json:"post_processor"`
	// Other keys (truncation, padding) do not affect encode(text): transformers
	// turns both off for an unpadded, untruncated call.
}

type typedJSON struct {
	Type     string      `json:"type"`
	Decoders []typedJSON `json:"decoders"`
}

type addedJSON struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   json.RawMessage `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

// loads counts the tokenizers built in this process; each gets the count as its id.
var loads atomic.Uint64

// Load reads a Hugging Face tokenizer.json (a BPE model with the
// normalizers and pre-tokenizers of the package doc). Errors wrap the file
// error, a JSON error, or ErrUnsupported naming the field that does not fit.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading tokenizer: %w", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("loading tokenizer %s: %w", path, err)
	}
	return t, nil
}

// parse builds a Tokenizer from tokenizer.json bytes.
func parse(data []byte) (*Tokenizer, error) {
	rest, vocabSpan, mergesSpan, err := splitModelTables(data)
	if err != nil {
		return nil, fmt.Errorf("decoding json: %w", err)
	}
	var f fileJSON
	if err := json.Unmarshal(rest, &f); err != nil {
		return nil, fmt.Errorf("decoding json: %w", err)
	}
	t := &Tokenizer{id: loads.Add(1)}
	if err := t.setPipeline(&f); err != nil {
		return nil, err
	}
	if t.post, err = parsePostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	if vocabSpan.end == 0 {
		return nil, fmt.Errorf("checking model: %w: no vocab", ErrUnsupported)
	}
	initClasses()
	vocab, err := parseVocab(data[vocabSpan.start:vocabSpan.end])
	if err != nil {
		return nil, fmt.Errorf("decoding model.vocab: %w", err)
	}
	if len(vocab) == 0 {
		return nil, fmt.Errorf("checking model: %w: empty vocab", ErrUnsupported)
	}
	t.vocab = vocab
	maxID := -1
	for _, id := range vocab {
		maxID = max(maxID, int(id))
	}
	for _, a := range f.AddedTokens {
		maxID = max(maxID, int(a.ID))
	}
	// Ids index dense tables: refuse sparse ids that would make them huge.
	if limit := 2*(len(vocab)+len(f.AddedTokens)) + 1024; maxID >= limit {
		return nil, fmt.Errorf("checking ids: %w: token id %d for %d tokens is too sparse", ErrUnsupported, maxID, len(vocab)+len(f.AddedTokens))
	}
	if err := t.setDecode(maxID); err != nil {
		return nil, err
	}
	if t.ignoreMerges && t.byteLevel {
		// ignore_merges looks the whole pre-token up in the vocabulary (in
		// its byte-level spelling); index the byte-level tokens by their raw
		// bytes (tokens outside the alphabet cannot be such a spelling).
		t.rawVocab = make(map[string]uint32, len(vocab))
		for tok, id := range vocab {
			if inByteAlphabet(tok) {
				t.rawVocab[t.decode[id]] = id
			}
		}
	}
	if err := t.setByteIDs(); err != nil {
		return nil, err
	}
	t.merges = make(map[uint64]merge, len(vocab))
	var pair []byte
	mergesRaw := []byte("[]")
	if mergesSpan.end != 0 {
		mergesRaw = data[mergesSpan.start:mergesSpan.end]
	}
	err = parseMerges(mergesRaw, func(a, b []byte) error {
		rank := len(t.rankIDs)
		left, ok1 := t.vocab[string(a)]
		right, ok2 := t.vocab[string(b)]
		pair = append(append(pair[:0], a...), b...)
		res, ok3 := t.vocab[string(pair)]
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("merge %d %q %q: token not in vocab", rank, a, b)
		}
		t.merges[pairKey(left, right)] = merge{rank: uint32(rank), id: res}
		t.rankIDs = append(t.rankIDs, res)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decoding model.merges: %w", err)
	}
	if err := t.setAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	t.cache.reset()
	return t, nil
}

// setDecode fills the id → raw bytes table of the vocabulary (one shared
// backing string).
func (t *Tokenizer) setDecode(maxID int) error {
	type span struct{ off, n int }
	spans := make([]span, maxID+1)
	t.known = make([]bool, maxID+1)
	var arena []byte
	for tok, id := range t.vocab {
		off := len(arena)
		switch {
		case t.byteLevel && inByteAlphabet(tok):
			for _, r := range tok {
				arena = append(arena, byte(runeToByte[r]))
			}
		case t.byteLevel:
			// Outside the byte-level alphabet (DeepSeek-V3's "<｜▁pad▁｜>"):
			// BPE never produces it; HF's ByteLevel decoder gives its text.
			arena = append(arena, tok...)
		default:
			// Character-level vocabulary (Gemma): <0xXX> is byte XX, "▁" a
			// space, as its decoder (Replace, ByteFallback, Fuse) does.
			if b, ok := byteFallbackByte(tok); ok {
				arena = append(arena, b)
			} else {
				arena = append(arena, strings.ReplaceAll(tok, "▁", " ")...)
			}
		}
		spans[id], t.known[id] = span{off, len(arena) - off}, true
	}
	all := string(arena)
	t.decode = make([]string, maxID+1)
	for id, sp := range spans {
		t.decode[id] = all[sp.off : sp.off+sp.n]
	}
	return nil
}

// setAdded indexes the added tokens for leftmost-longest matching: those
// with normalized false in the raw text, the others (their content
// normalized) in each normalized segment, as Hugging Face's AddedVocabulary.
func (t *Tokenizer) setAdded(list []addedJSON) error {
	t.byContent = make(map[string]uint32, len(list))
	for _, tok := range list {
		if tok.Content == "" {
			return fmt.Errorf("checking added token %d: %w: empty content", tok.ID, ErrUnsupported)
		}
		if tok.SingleWord || tok.LStrip || tok.RStrip {
			return fmt.Errorf("checking added token %q: %w: single_word, lstrip and rstrip must be false", tok.Content, ErrUnsupported)
		}
		if _, dup := t.byContent[tok.Content]; dup {
			continue // Hugging Face keeps the first
		}
		t.byContent[tok.Content] = tok.ID
		t.decode[tok.ID], t.known[tok.ID] = tok.Content, true
		if tok.Normalized && t.norm != nil {
			if c := t.norm(tok.Content); c != "" {
				t.addedNorm.add(c, tok.ID)
			}
			continue
		}
		if tok.Normalized {
			t.addedNorm.add(tok.Content, tok.ID)
		} else {
			t.added.add(tok.Content, tok.ID)
		}
	}
	t.added.sort()
	t.addedNorm.sort()
	return nil
}

// setPipeline reads the normalizer, pre-tokenizer and model options and
// rejects every tokenizer.json feature this package does not implement
// exactly.
func (t *Tokenizer) setPipeline(f *fileJSON) error {
	var err error
	if t.norm, err = buildNormalizer(f.Normalizer); err != nil {
		return err
	}
	if p := f.PreTokenizer; p != nil {
		t.fast, t.fastDigits, t.fastO200k = fastPath(p)
		t.fastDeepseek = isDeepseekPreTok(p)
		if t.fast != 0 || t.fastO200k || t.fastDeepseek {
			t.byteLevel = true
			initCases()
		} else if t.stages, t.byteLevel, err = buildStages(p); err != nil {
			return err
		}
	}
	m := &f.Model
	switch {
	case m.Type != "BPE":
		return fmt.Errorf("checking model: %w: type %q, want BPE", ErrUnsupported, m.Type)
	case m.Dropout != nil && *m.Dropout != 0:
		return fmt.Errorf("checking model: %w: dropout", ErrUnsupported)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "",
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return fmt.Errorf("checking model: %w: continuing_subword_prefix/end_of_word_suffix", ErrUnsupported)
	case t.byteLevel && m.ByteFallback:
		return fmt.Errorf("checking model: %w: byte_fallback with a ByteLevel pre-tokenizer", ErrUnsupported)
	case !t.byteLevel && !m.ByteFallback:
		// Without byte fallback a character missing from the vocabulary
		// becomes unk_token or vanishes; not implemented.
		return fmt.Errorf("checking model: %w: a BPE without ByteLevel pre-tokenizer needs byte_fallback", ErrUnsupported)
	}
	t.ignoreMerges = m.IgnoreMerges
	return checkDecoder(f.Decoder, t.byteLevel)
}

// fastPath returns the letters mask and digit run of the Qwen-style
// scanner, or o200k for gpt-oss's scanner, when p is exactly a Sequence of
// Split (the Qwen2/3, Qwen3.5, Llama 3 or o200k regex, Isolated, not
// inverted) and ByteLevel (no prefix space, no regex), else zeros.
func fastPath(p *preTokJSON) (letters uint8, digits int, o200k bool) {
	if p.Type != "Sequence" || len(p.PreTokenizers) != 2 {
		return 0, 0, false
	}
	sp, bl := p.PreTokenizers[0], p.PreTokenizers[1]
	if sp.Type != "Split" || sp.Pattern == nil || sp.Pattern.Regex == nil || sp.Behavior != "Isolated" || sp.Invert ||
		bl.Type != "ByteLevel" || bl.AddPrefixSpace == nil || *bl.AddPrefixSpace || bl.UseRegex == nil || *bl.UseRegex {
		return 0, 0, false
	}
	switch *sp.Pattern.Regex {
	case qwenSplitRegex:
		return clsLetter, 1, false
	case qwen35SplitRegex:
		return clsLetter | clsMark, 1, false
	case llama3SplitRegex:
		return clsLetter, 3, false
	case o200kSplitRegex:
		return 0, 0, true
	}
	return 0, 0, false
}

// isDeepseekPreTok reports DeepSeek-V3's pre_tokenizer exactly: a
// Sequence of the three Splits of pretokenize_deepseek.go (Isolated, not
// inverted) and ByteLevel (no prefix space, no regex).
func isDeepseekPreTok(p *preTokJSON) bool {
	if p.Type != "Sequence" || len(p.PreTokenizers) != 4 {
		return false
	}
	for i, want := range []string{deepseekDigitsRegex, deepseekCJKRegex, deepseekWordRegex} {
		sp := p.PreTokenizers[i]
		if sp.Type != "Split" || sp.Pattern == nil || sp.Pattern.Regex == nil || *sp.Pattern.Regex != want ||
			sp.Behavior != "Isolated" || sp.Invert {
			return false
		}
	}
	bl := p.PreTokenizers[3]
	return bl.Type == "ByteLevel" && bl.AddPrefixSpace != nil && !*bl.AddPrefixSpace && bl.UseRegex != nil && !*bl.UseRegex
}

// checkDecoder admits the decoders Decode implements: ByteLevel for a
// byte-level vocabulary; for a character-level one (byte fallback) the
// Sequence of Replace "▁" → " ", ByteFallback, Fuse (and Strip) that Gemma
// uses, or Metaspace. A missing decoder is accepted (Encode does not use it).
func checkDecoder(d *typedJSON, byteLevel bool) error {
	if d == nil {
		return nil
	}
	if byteLevel {
		if d.Type != "ByteLevel" {
			return fmt.Errorf("checking decoder: %w: type %q, want ByteLevel", ErrUnsupported, d.Type)
		}
		return nil
	}
	list := []typedJSON{*d}
	if d.Type == "Sequence" {
		list = d.Decoders
	}
	for _, x := range list {
		switch x.Type {
		case "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace":
		default:
			return fmt.Errorf("checking decoder: %w: type %q", ErrUnsupported, x.Type)
		}
	}
	return nil
}

// setByteIDs fills byteIDs, the id of each byte as a one-byte word: the
// byte-level token of the byte, or (character level) the ASCII character's
// token, else its <0xXX> fallback token; and byteFallback, the <0xXX> ids.
func (t *Tokenizer) setByteIDs() error {
	for b := 0; b < 256; b++ {
		if t.byteLevel {
			id, ok := t.vocab[string(byteToRune[b])]
			if !ok {
				return fmt.Errorf("checking vocab: %w: no token for byte 0x%02x", ErrUnsupported, b)
			}
			t.byteIDs[b] = id
			continue
		}
		id, ok := t.vocab[fmt.Sprintf("<0x%02X>", b)]
		if !ok {
			return fmt.Errorf("checking vocab: %w: byte_fallback without token <0x%02X>", ErrUnsupported, b)
		}
		t.byteFallback[b] = id
		t.byteIDs[b] = id
		if c, ok := t.vocab[string(rune(b))]; ok && b < 0x80 {
			t.byteIDs[b] = c
		}
	}
	return nil
}

// inByteAlphabet reports whether every rune of tok is a GPT-2 byte-level
// character.
func inByteAlphabet(tok string) bool {
	for _, r := range tok {
		if r >= rune(len(runeToByte)) || runeToByte[r] < 0 {
			return false
		}
	}
	return true
}

// byteFallbackByte parses a <0xXX> token.
func byteFallbackByte(tok string) (byte, bool) {
	if len(tok) != 6 || tok[:3] != "<0x" || tok[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(tok[3:5], 16, 8)
	return byte(v), err == nil
}
