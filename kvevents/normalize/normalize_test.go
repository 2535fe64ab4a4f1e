package normalize

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/extrakeys"
	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kvevents/codec"
)

var qwen = blocks.Config{BlockSize: 16, ImagePad: 151655, VideoPad: 151656}

type storedWant struct {
	EngineHash   string   `json:"engine_hash"`
	Parent       *string  `json:"parent_engine_hash"`
	LocalHash    string   `json:"local_hash"`
	Kind         string   `json:"kind"`
	IdentitiesHx []string `json:"identities_hex"`
}

type eventsRecord struct {
	ID         string `json:"id"`
	Encoding   string `json:"encoding"`
	BlockSize  int    `json:"block_size"`
	PayloadHex string `json:"payload_hex"`
	Expected   struct {
		Stored  []storedWant `json:"stored"`
		Removed []string     `json:"removed"`
		Cleared bool         `json:"cleared"`
	} `json:"expected"`
}

func goldenEvents(t testing.TB) []eventsRecord {
	return goldens.Records[eventsRecord](t, "../../testdata/golden/vllm_events.jsonl")
}

// goldenPayloads returns the raw block-size-16 batches of vllm_events.jsonl in one encoding
// ("array" or "map"), in file order.
func goldenPayloads(tb testing.TB, encoding string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, r := range goldenEvents(tb) {
		if r.Encoding == encoding && r.BlockSize == 16 {
			p, err := hex.DecodeString(r.PayloadHex)
			if err != nil {
				tb.Fatalf("%s: decoding payload_hex: %v", r.ID, err)
			}
			out = append(out, p)
		}
	}
	return out
}

// flat is the §10a view of a normalized batch.
type flat struct {
	Stored  []storedWant
	Removed []string
	Cleared bool
}

func flatten(res Result) flat {
	f := flat{Stored: []storedWant{}, Removed: []string{}}
	for _, op := range res.Ops {
		for _, s := range op.Stored {
			w := storedWant{EngineHash: strconv.FormatUint(uint64(s.EngineHash), 10), LocalHash: strconv.FormatUint(uint64(s.LocalHash), 10),
				Kind: s.Kind.String(), IdentitiesHx: []string{}}
			if s.HasParent {
				p := strconv.FormatUint(uint64(s.ParentEngineHash), 10)
				w.Parent = &p
			}
			for _, id := range s.Identities {
				w.IdentitiesHx = append(w.IdentitiesHx, fmt.Sprintf("%016x", id))
			}
			f.Stored = append(f.Stored, w)
		}
		for _, h := range op.Removed {
			f.Removed = append(f.Removed, strconv.FormatUint(uint64(h), 10))
		}
		f.Cleared = f.Cleared || op.Type == codec.AllBlocksCleared
	}
	return f
}

func normalizeHex(t *testing.T, payloadHex string, bs int) Result {
	t.Helper()
	b, err := hex.DecodeString(payloadHex)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := codec.Decode(codec.VLLM, b)
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Blocks: blocks.Config{BlockSize: bs, ImagePad: 151655, VideoPad: 151656}, Encoding: codec.VLLM})
	if err != nil {
		t.Fatal(err)
	}
	res := n.Apply(bt)
	if res.Skipped != 0 {
		t.Fatalf("skipped %d: %v", res.Skipped, res.FirstErr)
	}
	return res
}

func TestGoldenVLLMEvents(t *testing.T) {
	recs := goldenEvents(t)
	matched, blocksMatched, blocksTotal := 0, 0, 0
	byID := map[string]string{}
	for _, r := range recs {
		ok := t.Run(r.ID, func(t *testing.T) {
			got := flatten(normalizeHex(t, r.PayloadHex, r.BlockSize))
			want := flat{Stored: r.Expected.Stored, Removed: r.Expected.Removed, Cleared: r.Expected.Cleared}
			if want.Removed == nil {
				want.Removed = []string{}
			}
			if len(got.Stored) != len(want.Stored) {
				t.Fatalf("%d stored, want %d", len(got.Stored), len(want.Stored))
			}
			for i := range want.Stored {
				blocksTotal++
				g, _ := json.Marshal(got.Stored[i])
				w, _ := json.Marshal(want.Stored[i])
				if string(g) != string(w) {
					t.Errorf("stored %d = %s, want %s", i, g, w)
					continue
				}
				blocksMatched++
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("batch = %s, want %s", g, w)
			}
			byID[r.ID] = string(g)
		})
		if ok {
			matched++
		}
	}
	t.Logf("vllm_events.jsonl: matched %d/%d batches, %d/%d stored blocks", matched, len(recs), blocksMatched, blocksTotal)
	if matched != len(recs) || len(recs) == 0 {
		t.Errorf("vllm_events.jsonl: matched %d/%d", matched, len(recs))
	}
	// Both vLLM encodings of one event set normalize identically.
	pairs := 0
	for id, out := range byID {
		if base, ok := cutSuffix(id, "_array"); ok {
			if m, ok := byID[base+"_map"]; ok {
				pairs++
				if m != out {
					t.Errorf("%s: array and map encodings differ", base)
				}
			}
		}
	}
	if pairs != 9 {
		t.Errorf("compared %d array/map pairs, want 9", pairs)
	}
}

func cutSuffix(s, suf string) (string, bool) {
	if len(s) >= len(suf) && s[len(s)-len(suf):] == suf {
		return s[:len(s)-len(suf)], true
	}
	return s, false
}

// TestSaltAcrossEvents: a salted chain continued in a later batch keeps its salt; a removal or a clear
// forgets it; the bound forgets the oldest.
func TestSaltAcrossEvents(t *testing.T) {
	toks := make([]uint32, 32)
	for i := range toks {
		toks[i] = uint32(100 + i)
	}
	salted := blocks.SeedFor("", "tenant-a")
	first := &codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1}, TokenIDs: toks[:16], BlockSize: 16,
		HasExtraKeys: true, ExtraKeys: [][]codec.ExtraKey{{{Kind: codec.KeyString, Str: "tenant-a"}}}}}}
	cont := func(parent, h kv.EngineHash) *codec.Batch {
		return &codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{h}, Parent: parent, HasParent: true,
			TokenIDs: toks[16:], BlockSize: 16, HasExtraKeys: true, ExtraKeys: [][]codec.ExtraKey{nil}}}}
	}
	n, _ := New(Config{Blocks: qwen, Encoding: codec.VLLM, MaxSaltedBlocks: 2})
	if got := n.Apply(first).Ops[0].Stored[0].LocalHash; got != blocks.HashTokens(toks[:16], salted) {
		t.Errorf("first block not salted")
	}
	if got := n.Apply(cont(1, 2)).Ops[0].Stored[0].LocalHash; got != blocks.HashTokens(toks[16:], salted) {
		t.Errorf("continued block not salted")
	}
	n.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{2}}}})
	if got := n.Apply(cont(2, 3)).Ops[0].Stored[0].LocalHash; got != blocks.HashTokens(toks[16:], blocks.BaseSeed) {
		t.Errorf("removed parent still salts")
	}
	n.Apply(cont(1, 4))
	n.Apply(cont(4, 5)) // bound 2: forgets 1
	if got := n.Apply(cont(1, 6)).Ops[0].Stored[0].LocalHash; got != blocks.HashTokens(toks[16:], blocks.BaseSeed) {
		t.Errorf("bound not applied")
	}
	if len(n.salts) > 2 {
		t.Errorf("%d salts kept, bound 2", len(n.salts))
	}
	n.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.AllBlocksCleared}}})
	if len(n.salts) != 0 {
		t.Errorf("clear kept %d salts", len(n.salts))
	}
	// A LoRA name in extra_keys is not a salt; it seeds through lora_name.
	lora := &codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{9}, TokenIDs: toks[:16], BlockSize: 16,
		LoRAName: "ad", HasLoRAName: true, HasExtraKeys: true, ExtraKeys: [][]codec.ExtraKey{{{Kind: codec.KeyString, Str: "ad"}}}}}}
	if got := n.Apply(lora).Ops[0].Stored[0].LocalHash; got != blocks.HashTokens(toks[:16], blocks.SeedFor("ad", "")) {
		t.Errorf("lora block: wrong seed")
	}
}

func TestSGLangAndDynamo(t *testing.T) {
	// SGLang: media pads are already pad values; the hash equals the request side's normalized block.
	toks := make([]uint32, 16)
	spans := []blocks.Span{{Start: 4, End: 12, Identity: 0xabcdef12345, Kind: blocks.Image}}
	for i := range toks {
		toks[i] = uint32(10 + i)
		if i >= 4 && i < 12 {
			toks[i] = 151655
		}
	}
	p, err := blocks.HashPrompt(qwen, blocks.BaseSeed, toks, spans)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := New(Config{Blocks: qwen, Encoding: codec.SGLang})
	res := n.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1}, TokenIDs: p.RoutingTokens, BlockSize: 16}}})
	if s := res.Ops[0].Stored[0]; s.LocalHash != p.Blocks[0].Hash || s.Kind != blocks.Normalized {
		t.Errorf("sglang block %+v, want %x normalized", s, p.Blocks[0].Hash)
	}
	// Dynamo: tokens_hash is taken as is.
	n, _ = New(Config{Blocks: qwen, Encoding: codec.DynamoJSON})
	bt, err := codec.Decode(codec.DynamoJSON, []byte(`[{"worker_id":1,"event":{"event_id":0,"data":{"stored":{"parent_hash":5,"blocks":[{"block_hash":6,"tokens_hash":77},{"block_hash":7,"tokens_hash":78}]}}}}]`))
	if err != nil {
		t.Fatal(err)
	}
	st := n.Apply(bt).Ops[0].Stored
	if len(st) != 2 || st[0].ParentEngineHash != 5 || st[1].ParentEngineHash != 6 || st[1].LocalHash != 78 || st[0].Kind != blocks.Precomputed {
		t.Errorf("dynamo stored %+v", st)
	}
}

func TestSkipsEventsThatDoNotFit(t *testing.T) {
	n, _ := New(Config{Blocks: qwen, Encoding: codec.VLLM})
	res := n.Apply(&codec.Batch{Events: []codec.Event{
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1}, TokenIDs: nil, BlockSize: 16, Medium: "CPU", HasMedium: true},
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1}, TokenIDs: make([]uint32, 8), BlockSize: 8},
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1}, TokenIDs: make([]uint32, 16), BlockSize: 16, HasExtraKeys: true},
		{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1, 2}, TokenIDs: make([]uint32, 16), BlockSize: 16},
		{Type: codec.BlockRemoved, BlockHashes: []kv.EngineHash{1}},
	}})
	want := []Filtered{{Event: 1, Reason: BlockSizeMismatch}, {Event: 3, Reason: NonDenseBlockSpan}}
	if res.Skipped != 1 || res.Ignored != 1 || len(res.Ops) != 1 || !errors.Is(res.FirstErr, ErrEvent) || !slices.Equal(res.Filtered, want) {
		t.Errorf("%+v", res)
	}
	// AnyBlockSize indexes the 8-token block at its own size.
	n, _ = New(Config{Blocks: blocks.Config{ImagePad: qwen.ImagePad, VideoPad: qwen.VideoPad}, Encoding: codec.VLLM, AnyBlockSize: true})
	toks := []uint32{1, 2, 3, 4, 5, 6, 7, 8}
	res = n.Apply(&codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: []kv.EngineHash{1}, TokenIDs: toks, BlockSize: 8}}})
	if len(res.Ops) != 1 || res.Ops[0].Stored[0].LocalHash != blocks.HashTokens(toks, blocks.BaseSeed) {
		t.Errorf("any block size: %+v", res)
	}
}

func TestIdentityStrings(t *testing.T) {
	for s, want := range map[string]bool{
		"00ab00000000000f" + zeros(48):       true,
		"00AB00000000000F" + zeros(48):       false,
		"00ab00000000000f" + zeros(47) + "1": false,
		"00ab00000000000g" + zeros(48):       false,
		"00ab00000000000f" + zeros(47):       false,
	} {
		if IsIdentity(s) != want {
			t.Errorf("IsIdentity(%q) = %v", s, !want)
		}
	}
	if v, ok := ParseIdentity("00ab00000000000f" + zeros(48)); !ok || v != 0x00ab00000000000f {
		t.Errorf("ParseIdentity = %x %v", v, ok)
	}
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

// BenchmarkDecodeNormalize measures stored blocks per second from pre-encoded vLLM batches (both
// encodings of the golden event sets): decode + normalize + hash.
func BenchmarkDecodeNormalize(b *testing.B) {
	for _, form := range []string{"array", "map"} {
		b.Run(form, func(b *testing.B) {
			payloads := goldenPayloads(b, form)
			dc := codec.NewDecoder()
			n, _ := New(Config{Blocks: qwen, Encoding: codec.VLLM})
			stored, size := 0, 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := payloads[i%len(payloads)]
				bt, err := dc.Decode(codec.VLLM, p)
				if err != nil {
					b.Fatal(err)
				}
				for _, op := range n.Apply(bt).Ops {
					stored += len(op.Stored)
				}
				size += len(p)
			}
			b.ReportMetric(float64(stored)/b.Elapsed().Seconds(), "blocks/s")
			b.ReportMetric(float64(size)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
	// One BlockStored of 64 blocks of 16 tokens with a video: the shape of a long multimodal prompt.
	b.Run("video64", func(b *testing.B) {
		toks := make([]uint32, 64*16)
		for i := range toks {
			toks[i] = uint32(i * 7 % 150000)
			if i >= 100 && i < 900 && i%100 > 6 {
				toks[i] = 151656
			}
		}
		hashes := make([]kv.EngineHash, 64)
		for i := range hashes {
			hashes[i] = kv.EngineHash(uint64(i+1) * 0x9e3779b97f4a7c15)
		}
		spans := []blocks.Span{{Start: 100, End: 900, Identity: 0x1234abcd, Kind: blocks.Video}}
		bt := &codec.Batch{Events: []codec.Event{{Type: codec.BlockStored, BlockHashes: hashes, TokenIDs: toks, BlockSize: 16,
			HasExtraKeys: true, ExtraKeys: extrakeys.For(16, len(toks), spans, "", "", codec.PairKeys)}}}
		raw, err := codec.EncodeVLLM(bt, codec.ArrayForm, codec.MapForm)
		if err != nil {
			b.Fatal(err)
		}
		dc := codec.NewDecoder()
		n, _ := New(Config{Blocks: qwen, Encoding: codec.VLLM})
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			dec, err := dc.Decode(codec.VLLM, raw)
			if err != nil {
				b.Fatal(err)
			}
			if res := n.Apply(dec); len(res.Ops[0].Stored) != 64 {
				b.Fatal("short")
			}
		}
		b.ReportMetric(float64(b.N)*64/b.Elapsed().Seconds(), "blocks/s")
	})
}
