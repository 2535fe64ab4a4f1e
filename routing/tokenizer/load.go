package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
)

// qwenSplitRegex is the only pre-tokenizer pattern this package implements.
const qwenSplitRegex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// ErrUnsupported is wrapped by Load errors for tokenizer.json files whose
// shape this package does not implement.
var ErrUnsupported = errors.New("unsupported tokenizer.json")

type fileJSON struct {
	AddedTokens  []addedJSON `json:"added_tokens"`
	Normalizer   *typedJSON  `json:"normalizer"`
	PreTokenizer *preTokJSON `json:"pre_tokenizer"`
	Decoder      *typedJSON  `json:"decoder"`
	Model        modelJSON   `json:"model"`
	// Other keys (truncation, padding, post_processor) do not affect
	// encode(text, add_special_tokens=False).
}

type typedJSON struct {
	Type string `json:"type"`
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

type preTokJSON struct {
	Type          string       `json:"type"`
	PreTokenizers []preTokJSON `json:"pretokenizers"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
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

// Load reads a Hugging Face tokenizer.json (byte-level BPE with the Qwen
// split pre-tokenizer, see the package doc). Errors wrap the file error, a
// JSON error, or ErrUnsupported naming the field that does not fit.
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
	if err := checkShape(&f); err != nil {
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
	t := &Tokenizer{vocab: vocab}
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
	for b := 0; b < 256; b++ {
		id, ok := t.vocab[string(byteToRune[b])]
		if !ok {
			return nil, fmt.Errorf("checking vocab: %w: no token for byte 0x%02x", ErrUnsupported, b)
		}
		t.byteIDs[b] = id
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
	t.cache.m = make(map[string][]uint32, 1024)
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
		for _, r := range tok {
			if r >= rune(len(runeToByte)) || runeToByte[r] < 0 {
				return fmt.Errorf("checking vocab: %w: token %q is not in the byte-level alphabet", ErrUnsupported, tok)
			}
			arena = append(arena, byte(runeToByte[r]))
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

// setAdded indexes the added tokens for leftmost-longest matching.
func (t *Tokenizer) setAdded(list []addedJSON) error {
	a := &t.added
	a.byContent = make(map[string]uint32, len(list))
	for _, tok := range list {
		if tok.Content == "" {
			return fmt.Errorf("checking added token %d: %w: empty content", tok.ID, ErrUnsupported)
		}
		if tok.SingleWord || tok.LStrip || tok.RStrip || tok.Normalized {
			return fmt.Errorf("checking added token %q: %w: single_word, lstrip, rstrip and normalized must be false", tok.Content, ErrUnsupported)
		}
		if _, dup := a.byContent[tok.Content]; dup {
			continue // Hugging Face keeps the first
		}
		a.byContent[tok.Content] = tok.ID
		t.decode[tok.ID], t.known[tok.ID] = tok.Content, true
		b := tok.Content[0]
		if len(a.byFirst[b]) == 0 {
			a.first = append(a.first, b)
		}
		a.byFirst[b] = append(a.byFirst[b], tok.Content)
	}
	for b := range a.byFirst {
		toks := a.byFirst[b]
		sort.SliceStable(toks, func(i, j int) bool { return len(toks[i]) > len(toks[j]) })
	}
	return nil
}

// checkShape rejects every tokenizer.json feature this package does not
// implement exactly.
func checkShape(f *fileJSON) error {
	if f.Normalizer == nil || f.Normalizer.Type != "NFC" {
		return fmt.Errorf("checking normalizer: %w: want {\"type\":\"NFC\"}", ErrUnsupported)
	}
	p := f.PreTokenizer
	if p == nil || p.Type != "Sequence" || len(p.PreTokenizers) != 2 {
		return fmt.Errorf("checking pre_tokenizer: %w: want a Sequence of Split and ByteLevel", ErrUnsupported)
	}
	sp, bl := p.PreTokenizers[0], p.PreTokenizers[1]
	if sp.Type != "Split" || sp.Pattern == nil || sp.Pattern.Regex == nil || *sp.Pattern.Regex != qwenSplitRegex ||
		sp.Behavior != "Isolated" || sp.Invert {
		return fmt.Errorf("checking pre_tokenizer: %w: want Split, behavior Isolated, not inverted, regex %s", ErrUnsupported, qwenSplitRegex)
	}
	if bl.Type != "ByteLevel" || bl.AddPrefixSpace || (bl.UseRegex != nil && *bl.UseRegex) {
		return fmt.Errorf("checking pre_tokenizer: %w: want ByteLevel with add_prefix_space and use_regex false", ErrUnsupported)
	}
	if f.Decoder != nil && f.Decoder.Type != "ByteLevel" {
		return fmt.Errorf("checking decoder: %w: type %q, want ByteLevel", ErrUnsupported, f.Decoder.Type)
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
	case m.ByteFallback:
		return fmt.Errorf("checking model: %w: byte_fallback", ErrUnsupported)
	case m.IgnoreMerges:
		return fmt.Errorf("checking model: %w: ignore_merges", ErrUnsupported)
	}
	return nil
}
