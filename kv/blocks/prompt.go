package blocks

import (
	"errors"
	"fmt"

	"github.com/kvroute/kvroute/kv"
)

// ErrSpans is wrapped by errors about media spans that do not fit the token sequence.
var ErrSpans = errors.New("invalid media spans")

// Block is one complete block of a hashed prompt.
type Block struct {
	// Index is the block's position in the prompt (tokens [Index*BlockSize, (Index+1)*BlockSize)).
	Index int
	Hashed
	// FirstSpan and NumSpans give the spans intersecting the block: spans[FirstSpan:FirstSpan+NumSpans].
	FirstSpan, NumSpans int
}

// Prompt is a request's worker-visible token sequence hashed block by block.
type Prompt struct {
	// Blocks holds one entry per complete block; the partial tail is not hashed.
	Blocks []Block
	// RoutingTokens is the routing view of the complete blocks (len(Blocks)*BlockSize ids): pad values
	// in normalized blocks, worker tokens in plain and boundary blocks. It is a new slice.
	RoutingTokens []uint32
}

// Hashes returns the LocalBlockHashes of p's blocks, in order: the query of an index lookup.
func (p *Prompt) Hashes() []kv.BlockHash {
	out := make([]kv.BlockHash, len(p.Blocks))
	for i, b := range p.Blocks {
		out[i] = b.Hash
	}
	return out
}

// HashPrompt hashes the complete blocks of a request's worker-visible tokens (DESIGN.md §5) under seed
// (see SeedFor). spans are the media placeholder ranges in prompt order: 0 <= Start < End <= len(tokens),
// each starting at or after the previous one's End; otherwise the error wraps ErrSpans. tokens and spans
// are only read. Each block is hashed by Hasher.Block with the identities of the spans it intersects,
// the same function the event side uses.
func HashPrompt(cfg Config, seed uint64, tokens []uint32, spans []Span) (*Prompt, error) {
	h, err := NewHasher(cfg)
	if err != nil {
		return nil, err
	}
	return h.Prompt(tokens, spans, seed)
}

// Prompt is HashPrompt with h's configuration and scratch buffers.
func (h *Hasher) Prompt(tokens []uint32, spans []Span, seed uint64) (*Prompt, error) {
	if err := checkSpans(spans, len(tokens)); err != nil {
		return nil, err
	}
	bs := h.cfg.BlockSize
	nb := len(tokens) / bs
	p := &Prompt{Blocks: make([]Block, nb), RoutingTokens: make([]uint32, nb*bs)}
	h.eachBlock(tokens, spans, seed, p.RoutingTokens, func(b, first, k int, bh Hashed) {
		p.Blocks[b] = Block{Index: b, Hashed: bh, FirstSpan: first, NumSpans: k - first}
	})
	return p, nil
}

// HashBlocks returns the LocalBlockHashes of the complete blocks, in order: what
// HashPrompt(...).Hashes() returns, without building the per-block records and the routing view
// that only the CLI and the tests read. It is the router's hot path (the index lookup needs only
// the hashes); errors as HashPrompt.
func HashBlocks(cfg Config, seed uint64, tokens []uint32, spans []Span) ([]kv.BlockHash, error) {
	h, err := NewHasher(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkSpans(spans, len(tokens)); err != nil {
		return nil, err
	}
	out := make([]kv.BlockHash, len(tokens)/cfg.BlockSize)
	if len(spans) == 0 {
		// Every block is Plain (no media span intersects it): Block's rule reduces to one XXH3
		// per block, without its per-block record and callback (a text prompt's whole cost here).
		h.buf = hashPlainBlocks(out, tokens, cfg.BlockSize, seed, h.buf)
		return out, nil
	}
	h.eachBlock(tokens, spans, seed, nil, func(b, _, _ int, bh Hashed) { out[b] = bh.Hash })
	return out, nil
}

// eachBlock hashes every complete block of tokens with the identities of the spans it intersects
// (spans checked by the caller) and calls visit with the block index, the intersecting spans
// spans[first:k] and the result. routing, when non-nil, has room for every complete block and
// receives the routing view (see Hasher.Block).
func (h *Hasher) eachBlock(tokens []uint32, spans []Span, seed uint64, routing []uint32, visit func(b, first, k int, bh Hashed)) {
	bs := h.cfg.BlockSize
	nb := len(tokens) / bs
	var ids []kv.Identity
	first := 0 // first span that may intersect the current block
	for b := 0; b < nb; b++ {
		start, end := b*bs, (b+1)*bs
		for first < len(spans) && spans[first].End <= start {
			first++
		}
		ids = ids[:0]
		k := first
		for ; k < len(spans) && spans[k].Start < end; k++ {
			ids = append(ids, spans[k].Identity)
		}
		var view []uint32
		if routing != nil {
			view = routing[start:end:end]
		}
		// tokens[start:end:end] caps the view so nothing appended to it could reach the next block
		// (field report 9); Block only reads it anyway.
		visit(b, first, k, h.Block(tokens[start:end:end], ids, seed, view))
	}
}

func checkSpans(spans []Span, n int) error {
	prevEnd := 0
	for i, s := range spans {
		if s.Start < prevEnd || s.End <= s.Start || s.End > n {
			return fmt.Errorf("checking span %d [%d, %d) of %d tokens: %w", i, s.Start, s.End, n, ErrSpans)
		}
		prevEnd = s.End
	}
	return nil
}
