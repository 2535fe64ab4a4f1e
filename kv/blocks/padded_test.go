package blocks

import (
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/goldens"
)

// TestPromptPaddedGolden: on every normalize.jsonl prompt, SGLang-style padding gives the golden hash
// of every plain and normalized block (boundary blocks are where the two engines differ), and routing
// tokens equal the golden ones outside boundary blocks.
func TestPromptPaddedGolden(t *testing.T) {
	recs := goldens.Records[goldens.NormalizeRecord](t, "../../testdata/golden/normalize.jsonl")
	checked := 0
	for _, r := range recs {
		in := r.Inputs
		spans := make([]Span, len(in.Spans))
		for i, s := range in.Spans {
			spans[i] = Span{Start: s.Start, End: s.End, Identity: kv.Identity(u64(t, s.Identity))}
		}
		h, _ := NewHasher(Config{BlockSize: in.BlockSize, ImagePad: in.ImagePad, VideoPad: in.VideoPad})
		seed := SeedFor(optString(in.LoRAName), optString(in.CacheSalt))
		p, err := h.PromptPadded(in.Tokens, spans, seed)
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range r.Outputs.Blocks {
			if w.Kind == "boundary" {
				continue
			}
			checked++
			if g := p.Blocks[i]; g.Hash != blockHash(t, w.LocalHash) || g.Kind.String() != w.Kind {
				t.Errorf("%s block %d: %x %v, want %s %s", r.ID, i, g.Hash, g.Kind, w.LocalHash, w.Kind)
			}
			bs := in.BlockSize
			for j := i * bs; j < (i+1)*bs; j++ {
				if p.RoutingTokens[j] != r.Outputs.RoutingTokens[j] {
					t.Fatalf("%s token %d: %d, want %d", r.ID, j, p.RoutingTokens[j], r.Outputs.RoutingTokens[j])
				}
			}
		}
	}
	if checked != 334 {
		t.Errorf("checked %d plain+normalized blocks, want 334", checked)
	}
}
