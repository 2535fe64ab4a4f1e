// Package tokenizer is an exact, bounded-time encoder for Hugging Face
// tokenizer.json files of the byte-level BPE shape used by Qwen2/Qwen3 and
// Qwen3-VL.
//
// [Tokenizer.Encode] returns the same ids as Hugging Face tokenizers
// (Rust) `encode(text, add_special_tokens=False)`:
//
//  1. Added tokens (special and non-special) are split out of the raw text
//     first, leftmost-longest, each becoming its single id.
//  2. Each remaining segment is NFC-normalized as Hugging Face does it
//     (crate unicode-normalization-alignments 0.1.12: Unicode 9.0.0 data, no
//     stream-safe limit). golang.org/x/text/unicode/norm does the work; where
//     it would differ (more than 30 combining marks in a row, where it
//     inserts U+034F, or one of the 175 code points whose class or
//     decomposition postdates Unicode 9.0, see nfc9.go), a full canonical
//     NFC restricted to Unicode 9.0 data runs instead.
//  3. A hand-written scanner equivalent to Qwen's split regex
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//     cuts the segment into pre-tokens, with Oniguruma semantics: \s is the
//     Unicode White_Space property, alternatives are tried in order.
//  4. Each pre-token's bytes are mapped to the GPT-2 byte-level alphabet and
//     merged by BPE: the lowest merge rank first, the leftmost pair among
//     equal ranks (Hugging Face tokenizers models/bpe/word.rs), with a binary
//     heap over a linked list of symbols, O(n log n) per pre-token.
//
// Load accepts only that shape (NFC normalizer, the Split+ByteLevel
// pre-tokenizer with exactly the regex above, a BPE model without dropout,
// byte fallback or subword affixes, added tokens without lstrip, rstrip,
// single_word or normalized) and fails with a descriptive error otherwise.
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
// White_Space did not change between these versions. NFC follows Unicode
// 9.0.0 data (step 2), a separate, older version: that is what Hugging Face's
// normalizer crate ships.
//
// A Tokenizer is immutable after Load apart from an internal, bounded
// per-word cache, and is safe for concurrent use.
package tokenizer
