package blocks

// PromptPadded hashes a prompt the way SGLang keys its radix cache (sglang mm_utils pad_input_tokens):
// every image or video pad id inside a media span is replaced with PadValue of that span's identity,
// pads outside spans and all other tokens stay, and each complete block of the result is hashed by
// Block with no identities (plain xxh3 of the padded tokens). SGLang's KV events carry exactly these
// padded token ids, so this is the request side for SGLang workers that accept forwarded mm_hashes;
// for vLLM workers use Prompt (DESIGN.md §5). Kind is Normalized for blocks holding a replaced pad,
// Plain otherwise. Spans are checked as in HashPrompt.
func (h *Hasher) PromptPadded(tokens []uint32, spans []Span, seed uint64) (*Prompt, error) {
	if err := checkSpans(spans, len(tokens)); err != nil {
		return nil, err
	}
	bs := h.cfg.BlockSize
	nb := len(tokens) / bs
	p := &Prompt{Blocks: make([]Block, nb), RoutingTokens: make([]uint32, nb*bs)}
	copy(p.RoutingTokens, tokens)
	padded := make([]bool, nb)
	for _, s := range spans {
		pv := PadValue(s.Identity)
		for i := s.Start; i < s.End && i < nb*bs; i++ {
			if t := p.RoutingTokens[i]; t == h.cfg.ImagePad || t == h.cfg.VideoPad {
				p.RoutingTokens[i] = pv
				padded[i/bs] = true
			}
		}
	}
	first := 0
	for b := 0; b < nb; b++ {
		start, end := b*bs, (b+1)*bs
		for first < len(spans) && spans[first].End <= start {
			first++
		}
		k := first
		for k < len(spans) && spans[k].Start < end {
			k++
		}
		bh := h.Block(p.RoutingTokens[start:end:end], nil, seed, nil)
		if padded[b] {
			bh.Kind = Normalized
		}
		p.Blocks[b] = Block{Index: b, Hashed: bh, FirstSpan: first, NumSpans: k - first}
	}
	return p, nil
}
