package sim

import (
	"hash/fnv"
	"strings"
)

// Tokenizer turns prompt text into token ids. Implementations must be safe for concurrent use.
type Tokenizer interface {
	Encode(text string) []uint32
}

// WordTokenizer is the stand-in tokenizer: one token per whitespace-separated word, its id the
// FNV-1a hash of the word modulo 150000. It is deterministic, so equal prompts give equal tokens,
// but it is not any model's tokenizer.
type WordTokenizer struct{}

// Encode implements Tokenizer.
func (WordTokenizer) Encode(text string) []uint32 {
	words := strings.Fields(text)
	ids := make([]uint32, len(words))
	for i, w := range words {
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		ids[i] = h.Sum32() % 150000
	}
	return ids
}
