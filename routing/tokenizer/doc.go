// Package tokenizer is an exact, bounded-time encoder for Hugging Face
// tokenizer.json files with a BPE model: Qwen2/Qwen3/Qwen3-VL, Qwen3.5,
// Llama 3, Gemma 3, DeepSeek-V3, gpt-oss and any file built from the same
// parts.
//
// [Tokenizer.Encode] returns the same ids as Hugging Face tokenizers
// (Rust, 0.23) `encode(text, add_special_tokens=False)`:
//
//  1. Added tokens with normalized false (special and non-special) are split
//     out of the raw text first, leftmost-longest, each becoming its single
//     id.
//  2. Each remaining segment goes through the normalizer: NFC (as Hugging
//     Face does it: crate unicode-normalization-alignments 0.1.12, Unicode
//     9.0.0 data, no stream-safe limit; golang.org/x/text/unicode/norm does
//     the work, and where it would differ (more than 30 combining marks in a
//     row, where it inserts U+034F, or one of the 175 code points whose class
//     or decomposition postdates Unicode 9.0, see nfc9.go) a full canonical
//     NFC restricted to Unicode 9.0 data runs instead), Replace (String or
//     Regex pattern), Prepend, or a Sequence of these (normalize.go).
//     Added tokens with normalized true are then split out of the normalized
//     segment (their content normalized too).
//  3. The pre-tokenizer cuts the segment into pre-tokens. Fast path: a
//     Sequence of Split (Isolated) with Qwen2/Qwen3's regex
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//     or Qwen3.5's (\p{L}+ becomes [\p{L}\p{M}]+ and \p{M} leaves the
//     punctuation class) or Llama 3's (\p{N} becomes \p{N}{1,3}) and
//     ByteLevel runs a hand-written scanner (pretokenize.go), as do
//     gpt-oss's o200k pattern (pretokenize_o200k.go) and DeepSeek-V3's three
//     Splits (pretokenize_deepseek.go), with Oniguruma
//     semantics: \s is the Unicode White_Space property, alternatives are
//     tried in order, (?i) folds ASCII letters and U+017F (ſ → s). A seeded
//     differential test checks every scanner against regexp2 on random text.
//     General path (split.go): Split with any String or Regex pattern, every
//     behavior (Removed, Isolated, MergedWithPrevious, MergedWithNext,
//     Contiguous) and invert; ByteLevel (add_prefix_space, use_regex with the GPT-2 regex);
//     Metaspace (replacement, prepend_scheme always/first/never, split);
//     Sequence of these. Regexes run on github.com/dlclark/regexp2/v2
//     (regex.go), which matches Oniguruma on the constructs it admits;
//     constructs whose meaning differs (^ $ \w \b POSIX brackets, nested
//     classes, possessive quantifiers, …) fail at Load.
//  4. Each pre-token is merged by BPE: the lowest merge rank first, the
//     leftmost pair among equal ranks (Hugging Face tokenizers
//     models/bpe/word.rs), with a binary heap over a linked list of symbols,
//     O(n log n) per pre-token. With a ByteLevel pre-tokenizer the symbols
//     are the pre-token's bytes in the GPT-2 byte-level alphabet; otherwise
//     its characters, a character missing from the vocabulary becoming its
//     bytes' <0xXX> tokens (byte_fallback, Gemma). ignore_merges (Llama 3,
//     gpt-oss) maps a pre-token that is itself a vocabulary token to it.
//     The ids of a pre-token of at most 48 bytes are memoized in a bounded,
//     lock-free per-tokenizer word cache (wordcache.go; they depend on the
//     pre-token alone, as in Hugging Face's BPE cache), and the scanner loop
//     handles an ASCII word found there without a call (encodeRun).
//     With a word bound (SetMaxWordBytes; the router sets DefaultMaxWordBytes, 256 KiB) a
//     pre-token longer than the bound is not merged but becomes TooCostlyID, and
//     CheckBounded/CheckBoundedRuns report the prompt (bound.go): BPE of one pre-token is
//     O(n log n) time and about 50 bytes per byte, unbounded in Hugging Face and vLLM.
//
// encode(text, add_special_tokens=True) is Encode followed by PostProcessor().Apply (postprocess.go:
// tokenizer.json's post_processor as tokenizers 0.23 applies it); ForTransformers gives the
// post-processor Hugging Face transformers 4.x uses instead, with tokenizer_config.json
// (transformers.go). A post-processor that is not reproduced loads, and Apply refuses it
// (ErrSpecialTokens).
//
// A prompt given in pieces (EncodePiecesRuns, over internal/jinja's Piece, the one piece type of
// the chat path: a chat prompt whose earlier turns the template cache replayed) encodes to
// Encode of the joined text, as runs. A noted piece's region, from its first added token to the
// end of its last added token whose leftmost-longest match cannot depend on what follows the
// piece, is encoded once and kept in the piece's note (jinja.Note, the tokenizer's own slot); the
// text between regions is encoded as Encode would, after checking that no added token straddles
// into the next region (pieces.go states the argument). This is the seam to the router: the
// tokenizer returns ids and, for a region's run, an opaque comparable RunKey (the note and this
// tokenizer load) under which a caller keeps what it derives from the ids in the note's slot of
// its own; the router keeps the run's block hashes there. The tokenizer knows nothing of blocks.
//
// Load fails with a descriptive error wrapping ErrUnsupported for anything
// else: other normalizers (NFKC, Lowercase, …), other pre-tokenizers
// (Whitespace, BertPreTokenizer, …), a ByteLevel that is not last, non-BPE
// models, dropout, subword affixes, a character-level BPE without
// byte_fallback, added tokens with lstrip, rstrip or single_word.
//
// # Unicode policy
//
// The classes \p{L} and \p{N} follow Unicode 16.0.0, the version the
// Oniguruma inside Hugging Face's tokenizers build knows. Letters and numbers
// added in Unicode 15.1 (CJK Extension I) and 16.0 (Garay, Sunuwar, Ol Onal,
// Kirat Rai, Gurung Khema, Todhri, Tulu-Tigalari, Egyptian Hieroglyphs
// Extended-A, …) count, as Go's own tables (Unicode 17.0.0 in Go 1.27)
// already contain them. Code points assigned in Unicode 17.0 (CJK Extension
// J, Sidetic, Tolong Siki, Beria Erfe, Tai Yo, Tangut additions, …) do NOT
// count as letters or numbers: they are treated like punctuation, as
// Hugging Face does today. The exclusions are the generated table in
// unicode16.go (gen_unicode16.go, from the Unicode 16.0.0 tables of
// rust-lang/regex's regex-syntax); a test fails if the Go toolchain's
// Unicode version is no longer the one the table was generated against.
// White_Space did not change between these versions. The same holds for
// \p{M} on the fast path (a mark assigned in Unicode 17.0 is punctuation)
// and for every \p{..} class on the general path: code points assigned in
// Go's tables but not in Unicode 16.0.0 (golang.org/x/text/unicode/
// rangetable.Assigned("16.0.0")) are replaced, before regexp2 runs, by a
// code point of the same UTF-8 length that no Unicode version assigns
// (assigned16.go), so they are \p{Cn} as in Oniguruma and match offsets
// stay valid. Category changes of already assigned code points between
// 16.0 and 17.0 are not modelled (none affects \p{L} or \p{N}). NFC
// follows Unicode 9.0.0 data (step 2), a separate, older version: that is
// what Hugging Face's normalizer crate ships.
//
// A Tokenizer is immutable after Load apart from an internal, bounded
// per-word cache, and is safe for concurrent use.
package tokenizer
