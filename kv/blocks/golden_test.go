package blocks

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/goldens"
)

// u64 parses a golden decimal u64 string.
func u64(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("parsing u64 %q: %v", s, err)
	}
	return v
}

// blockHash parses a golden LocalBlockHash.
func blockHash(t *testing.T, s string) kv.BlockHash {
	t.Helper()
	return kv.BlockHash(u64(t, s))
}

func optString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type blockHashRecord struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Inputs struct {
		BlockSize  int      `json:"block_size"`
		Tokens     []uint32 `json:"tokens"`
		Seed       string   `json:"seed"`
		LoRAName   *string  `json:"lora_name"`
		CacheSalt  *string  `json:"cache_salt"`
		Identities []string `json:"identities"`
		Identity   string   `json:"identity"`
		Hashes     []string `json:"block_hashes"`
	} `json:"inputs"`
	Outputs struct {
		LocalHash string   `json:"local_hash"`
		Seed      string   `json:"seed"`
		LoRATerm  *string  `json:"lora_term"`
		SaltTerm  *string  `json:"salt_term"`
		Sorted    []string `json:"sorted_identities"`
		PadValue  uint32   `json:"pad_value"`
		Low30     uint32   `json:"low30"`
		SeqHashes []string `json:"seq_hashes"`
	} `json:"outputs"`
}

func TestGoldenBlockHash(t *testing.T) {
	recs := goldens.Records[blockHashRecord](t, "../../testdata/golden/block_hash.jsonl")
	matched := 0
	for _, r := range recs {
		ok := t.Run(r.ID, func(t *testing.T) {
			in, out := r.Inputs, r.Outputs
			switch r.Kind {
			case "plain":
				h, err := NewHasher(Config{BlockSize: len(in.Tokens), ImagePad: 151655, VideoPad: 151656})
				if err != nil {
					t.Fatal(err)
				}
				if got := h.Block(in.Tokens, nil, u64(t, in.Seed), nil); got.Hash != blockHash(t, out.LocalHash) || got.Kind != Plain {
					t.Errorf("Block = %+v, want %s plain", got, out.LocalHash)
				}
				if got := HashTokens(in.Tokens, u64(t, in.Seed)); got != blockHash(t, out.LocalHash) {
					t.Errorf("HashTokens = %d, want %s", got, out.LocalHash)
				}
			case "seed":
				lora, salt := optString(in.LoRAName), optString(in.CacheSalt)
				seed := SeedFor(lora, salt)
				if seed != u64(t, out.Seed) {
					t.Errorf("SeedFor = %d, want %s", seed, out.Seed)
				}
				checkTerm(t, "lora", LoRATerm(lora), out.LoRATerm)
				checkTerm(t, "salt", SaltTerm(salt), out.SaltTerm)
				if got := HashTokens(in.Tokens, seed); got != blockHash(t, out.LocalHash) {
					t.Errorf("HashTokens = %d, want %s", got, out.LocalHash)
				}
			case "boundary":
				ids := make([]kv.Identity, len(in.Identities))
				for i, s := range in.Identities {
					ids[i] = kv.Identity(u64(t, s))
				}
				orig := append([]kv.Identity(nil), ids...)
				if got := HashBoundary(in.Tokens, ids, u64(t, in.Seed)); got != blockHash(t, out.LocalHash) {
					t.Errorf("HashBoundary = %d, want %s", got, out.LocalHash)
				}
				if fmt.Sprint(orig) != fmt.Sprint(ids) {
					t.Errorf("HashBoundary reordered its input")
				}
				if len(ids) > 0 {
					// A block with identities and no pad run is a boundary block through Block too.
					h, _ := NewHasher(Config{BlockSize: in.BlockSize, ImagePad: 1, VideoPad: 2})
					if got := h.Block(in.Tokens, ids, u64(t, in.Seed), nil); got.Hash != blockHash(t, out.LocalHash) || got.Kind != Boundary {
						t.Errorf("Block = %+v, want %s boundary", got, out.LocalHash)
					}
				}
			case "pad_value":
				id := kv.Identity(u64(t, in.Identity))
				if got := PadValue(id); got != out.PadValue || got-PadShift != out.Low30 {
					t.Errorf("PadValue = %d, want %d (low30 %d)", got, out.PadValue, out.Low30)
				}
			case "sequence":
				hs := make([]kv.BlockHash, len(in.Hashes))
				for i, s := range in.Hashes {
					hs[i] = blockHash(t, s)
				}
				got := SequenceHashes(hs)
				for i, s := range out.SeqHashes {
					if got[i] != u64(t, s) {
						t.Errorf("seq[%d] = %d, want %s", i, got[i], s)
					}
				}
			default:
				t.Fatalf("unknown kind %q", r.Kind)
			}
		})
		if ok {
			matched++
		}
	}
	t.Logf("block_hash.jsonl: matched %d/%d", matched, len(recs))
	if matched != len(recs) || len(recs) == 0 {
		t.Errorf("block_hash.jsonl: matched %d/%d", matched, len(recs))
	}
}

func checkTerm(t *testing.T, name string, got uint64, want *string) {
	t.Helper()
	if want == nil {
		if got != 0 {
			t.Errorf("%s term = %d, want absent", name, got)
		}
		return
	}
	if got != u64(t, *want) {
		t.Errorf("%s term = %d, want %s", name, got, *want)
	}
}

func TestGoldenNormalize(t *testing.T) {
	recs := goldens.Records[goldens.NormalizeRecord](t, "../../testdata/golden/normalize.jsonl")
	matched, blocksMatched, blocksTotal := 0, 0, 0
	for _, r := range recs {
		ok := t.Run(r.ID, func(t *testing.T) {
			in, out := r.Inputs, r.Outputs
			spans := make([]Span, len(in.Spans))
			for i, s := range in.Spans {
				kind := Image
				if s.Kind == "video" {
					kind = Video
				}
				spans[i] = Span{Start: s.Start, End: s.End, Identity: kv.Identity(u64(t, s.Identity)), Kind: kind}
			}
			seed := SeedFor(optString(in.LoRAName), optString(in.CacheSalt))
			if seed != u64(t, out.Seed) {
				t.Fatalf("seed = %d, want %s", seed, out.Seed)
			}
			tokens := append([]uint32(nil), in.Tokens...)
			p, err := HashPrompt(Config{BlockSize: in.BlockSize, ImagePad: in.ImagePad, VideoPad: in.VideoPad}, seed, tokens, spans)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(tokens) != fmt.Sprint(in.Tokens) {
				t.Fatalf("HashPrompt modified its input tokens")
			}
			if len(p.Blocks) != len(out.Blocks) {
				t.Fatalf("%d blocks, want %d", len(p.Blocks), len(out.Blocks))
			}
			seq := SequenceHashes(p.Hashes())
			for i, w := range out.Blocks {
				blocksTotal++
				g := p.Blocks[i]
				var gotSpans []int
				for k := g.FirstSpan; k < g.FirstSpan+g.NumSpans; k++ {
					gotSpans = append(gotSpans, k)
				}
				if g.Index != w.Index || g.Kind.String() != w.Kind || g.Hash != blockHash(t, w.LocalHash) ||
					g.Runs != w.NRuns || g.Objects != w.NObjects || fmt.Sprint(gotSpans) != fmt.Sprint(append([]int(nil), w.Spans...)) ||
					seq[i] != u64(t, w.SeqHash) {
					t.Errorf("block %d = %+v spans %v seq %d, want %+v", i, g, gotSpans, seq[i], w)
					continue
				}
				blocksMatched++
			}
			if fmt.Sprint(p.RoutingTokens) != fmt.Sprint(out.RoutingTokens) {
				t.Errorf("routing tokens differ")
			}
		})
		if ok {
			matched++
		}
	}
	t.Logf("normalize.jsonl: matched %d/%d prompts, %d/%d blocks", matched, len(recs), blocksMatched, blocksTotal)
	if matched != len(recs) || len(recs) == 0 {
		t.Errorf("normalize.jsonl: matched %d/%d", matched, len(recs))
	}
}
