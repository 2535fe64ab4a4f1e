package tokenizer

import (
	"errors"
	"fmt"
	"slices"
)

// Bounded tokenization (DESIGN.md §6 "Prompts"). BPE of one pre-token costs O(n log n) time and
// about 30 bytes of scratch per byte of the pre-token (its symbol list and candidate heap,
// bpe.go), and neither Hugging Face tokenizers nor vLLM bound a pre-token's length: a chat
// message of one 22 MB run of "x" is one pre-token, 28 s of CPU and 1.2 GB of scratch here.
// With a word bound set, a pre-token longer than the bound is not merged: its ids are the
// single id TooCostlyID, and the caller that checks (CheckBounded, CheckBoundedRuns) routes
// the prompt on load alone instead (reason prompt_too_costly). Every other pre-token is merged
// as before, so the ids of a prompt without an over-long pre-token are unchanged, and the
// scratch of one encode is at most about 30·bound bytes besides the ids (at most 4 bytes per
// byte of text).

// DefaultMaxWordBytes is the word bound the router sets: 256 KiB. No natural-language, code or
// markup pre-token comes near it (the Qwen split cuts at every change between letters, digits,
// punctuation and white space; the longest protein sequence, titin's, is about 35 000 letters),
// and the tokenizer goldens' longest pre-tokens (100 000 bytes of one letter, or of spaces) stay
// under it. BPE of a pre-token of this size takes about 100 ms and allocates about 13 MiB on a
// loaded 2-core machine (the worst, a run of one letter).
const DefaultMaxWordBytes = 256 << 10

// TooCostlyID stands for an over-long pre-token in the ids of a tokenizer with a word bound. It
// is no vocabulary id (ids are below VocabSize, far below 2^32 - 1).
const TooCostlyID = ^uint32(0)

// ErrTooCostly is returned by CheckBounded and CheckBoundedRuns for ids that hold TooCostlyID.
var ErrTooCostly = errors.New("prompt too costly to tokenize")

// SetMaxWordBytes sets the word bound: a pre-token of more than n bytes becomes TooCostlyID
// instead of its BPE ids. n ≤ 0 removes the bound (the default: Encode then equals Hugging Face
// for every text); a bound below the word cache's longest word (48 bytes) is raised to it. Call
// it before the tokenizer is shared (it is not synchronized with Encode), and use a tokenizer
// with a bound only where the ids are checked: its segment cache and piece notes keep
// TooCostlyID like any id.
func (t *Tokenizer) SetMaxWordBytes(n int) {
	if n > 0 {
		n = max(n, maxCachedWordLen)
	}
	t.maxWord = max(n, 0)
}

// MaxWordBytes returns the word bound, 0 when there is none.
func (t *Tokenizer) MaxWordBytes() int { return t.maxWord }

// tooLong reports whether w is over the word bound, and counts it.
func (t *Tokenizer) tooLong(w string) bool {
	if t.maxWord > 0 && len(w) > t.maxWord {
		t.tooCostlyWords.Add(1)
		return true
	}
	return false
}

// CheckBounded returns an error wrapping ErrTooCostly when ids, the encoding of a text of
// textLen bytes, hold an over-long pre-token. Until this tokenizer has met one (its segment
// cache and piece notes hold ids of its own encodes only), there is nothing to scan for.
// (The text's length alone does not tell: a normalizer or Metaspace may lengthen a pre-token
// beyond it, Gemma's ▁ for a space.)
func (t *Tokenizer) CheckBounded(textLen int, ids []uint32) error {
	if t.maxWord == 0 || t.tooCostlyWords.Load() == 0 || !slices.Contains(ids, TooCostlyID) {
		return nil
	}
	return t.tooCostly()
}

// CheckBoundedRuns is CheckBounded for ids in runs (EncodePiecesRuns), textLen the pieces' bytes.
func (t *Tokenizer) CheckBoundedRuns(textLen int, r Runs) error {
	if t.maxWord == 0 || t.tooCostlyWords.Load() == 0 {
		return nil
	}
	for _, ids := range r.IDs {
		if slices.Contains(ids, TooCostlyID) {
			return t.tooCostly()
		}
	}
	return nil
}

// TooCostlyWords is the number of pre-tokens met over the word bound since Load.
func (t *Tokenizer) TooCostlyWords() uint64 { return t.tooCostlyWords.Load() }

func (t *Tokenizer) tooCostly() error {
	return fmt.Errorf("%w: a pre-token (a run of letters, digits, punctuation or white space) is longer than %d bytes", ErrTooCostly, t.maxWord)
}
