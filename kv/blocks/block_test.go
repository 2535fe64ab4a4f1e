package blocks

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"
)

var qwen = Config{BlockSize: 16, ImagePad: 151655, VideoPad: 151656}

// fourBlocks builds 4 blocks of bs tokens whose block 2 is a video pad run; variant changes block 2.
func fourBlocks(bs int, variant uint32) []uint32 {
	toks := make([]uint32, 4*bs)
	for i := range toks {
		toks[i] = uint32(1000 + i)
	}
	for i := 2 * bs; i < 3*bs; i++ {
		toks[i] = 151656
	}
	toks[2*bs] = variant
	return toks
}

// TestNoAliasing is field report 9: prompts equal except block 2 give equal hashes for blocks 0..1,
// different ones for 2..3 (chained), and the inputs are unchanged, also when the prompt slice has spare
// capacity an append could write into.
func TestNoAliasing(t *testing.T) {
	for _, bs := range []int{16, 64} {
		cfg := Config{BlockSize: bs, ImagePad: 151655, VideoPad: 151656}
		a := make([]uint32, 0, 8*bs)
		a = append(a, fourBlocks(bs, 1)...)
		b := append(make([]uint32, 0, 8*bs), fourBlocks(bs, 2)...)
		ca, cb := slices.Clone(a), slices.Clone(b)
		spansA := []Span{{Start: 2*bs + 1, End: 3 * bs, Identity: 0xaaaa, Kind: Video}}
		spansB := []Span{{Start: 2*bs + 1, End: 3 * bs, Identity: 0xbbbb, Kind: Video}}
		pa, err := HashPrompt(cfg, BaseSeed, a, spansA)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := HashPrompt(cfg, BaseSeed, b, spansB)
		if err != nil {
			t.Fatal(err)
		}
		sa, sb := SequenceHashes(pa.Hashes()), SequenceHashes(pb.Hashes())
		if sa[0] != sb[0] || sa[1] != sb[1] || sa[2] == sb[2] || sa[3] == sb[3] {
			t.Errorf("bs %d: seq hashes %x vs %x", bs, sa, sb)
		}
		if !slices.Equal(a, ca) || !slices.Equal(b, cb) || !slices.Equal(a[:cap(a)][4*bs:], make([]uint32, 4*bs)) {
			t.Errorf("bs %d: HashPrompt wrote into its input", bs)
		}
		// Same tokens, other identity: block 2 must differ through the pad value alone.
		pc, _ := HashPrompt(cfg, BaseSeed, a, spansB)
		if pc.Blocks[2].Hash == pa.Blocks[2].Hash || pc.Blocks[2].Kind != Normalized {
			t.Errorf("bs %d: identity did not change the normalized block", bs)
		}
	}
}

// referenceBlock is an independent, copying implementation of the DESIGN.md §5 rule.
func referenceBlock(cfg Config, toks []uint32, ids []kv.Identity, seed uint64) (kv.BlockHash, Kind) {
	blk := slices.Clone(toks)
	if len(ids) == 0 {
		return HashTokens(blk, seed), Plain
	}
	type run struct{ s, e, obj int }
	var runs []run
	obj := -1
	prevVideo := false
	for i := 0; i < len(blk); i++ {
		if blk[i] != cfg.ImagePad && blk[i] != cfg.VideoPad {
			continue
		}
		j := i
		for j+1 < len(blk) && blk[j+1] == blk[i] {
			j++
		}
		v := blk[i] == cfg.VideoPad && cfg.VideoPad != cfg.ImagePad // a shared id counts as an image run
		if !v || !prevVideo {
			obj++
		}
		prevVideo = v
		runs = append(runs, run{i, j + 1, obj})
		i = j
	}
	if len(runs) > 0 && obj+1 == len(ids) {
		for _, r := range runs {
			for i := r.s; i < r.e; i++ {
				blk[i] = PadValue(ids[r.obj])
			}
		}
		return HashTokens(blk, seed), Normalized
	}
	return HashBoundary(blk, ids, seed), Boundary
}

func FuzzHashPrompt(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 1, 1, 1, 2, 2, 0, 2, 2, 2, 2, 1, 0, 0, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1}, uint8(4), uint16(3), uint16(20))
	f.Fuzz(func(t *testing.T, raw []byte, bs uint8, s0, s1 uint16) {
		cfg := Config{BlockSize: int(bs%17) + 1, ImagePad: 1, VideoPad: 2}
		if s0%3 == 0 {
			cfg.VideoPad = 1 // one placeholder id for images and video (Nemotron)
		}
		toks := make([]uint32, len(raw))
		for i, c := range raw {
			toks[i] = uint32(c % 4)
		}
		orig := slices.Clone(toks)
		var spans []Span
		a, b := int(s0)%(len(toks)+1), int(s1)%(len(toks)+1)
		if a > b {
			a, b = b, a
		}
		if a < b {
			spans = append(spans, Span{Start: a, End: b, Identity: kv.Identity(s0)<<48 | kv.Identity(s1), Kind: Video})
		}
		if b+2 < len(toks) {
			spans = append(spans, Span{Start: b + 1, End: len(toks), Identity: kv.Identity(s1) << 20, Kind: Image})
		}
		p, err := HashPrompt(cfg, BaseSeed, toks, spans)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(toks, orig) {
			t.Fatal("input modified")
		}
		if hs, err := HashBlocks(cfg, BaseSeed, toks, spans); err != nil || !slices.Equal(hs, p.Hashes()) {
			t.Fatalf("HashBlocks %v (%v), HashPrompt %v", hs, err, p.Hashes())
		}
		for i, blk := range p.Blocks {
			s, e := i*cfg.BlockSize, (i+1)*cfg.BlockSize
			var ids []kv.Identity
			for _, sp := range spans {
				if sp.Start < e && sp.End > s {
					ids = append(ids, sp.Identity)
				}
			}
			h, k := referenceBlock(cfg, orig[s:e], ids, BaseSeed)
			if h != blk.Hash || k != blk.Kind {
				t.Fatalf("block %d: %d %v, reference %d %v", i, blk.Hash, blk.Kind, h, k)
			}
		}
	})
}

// TestSharedPlaceholderRuns checks the rule for a model whose images and video share one
// placeholder id (Nemotron's <image> 18): every run starts a media object, so two tubelet runs of
// one video in a block are two objects against one span (boundary), while two items' runs are
// filled with their own pad values (normalized).
func TestSharedPlaceholderRuns(t *testing.T) {
	cfg := Config{BlockSize: 8, ImagePad: 18, VideoPad: 18}
	h, err := NewHasher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	blk := []uint32{18, 18, 20, 7, 19, 18, 18, 18}
	const a, b = kv.Identity(0x1234567890), kv.Identity(0xfedcba98)
	pa, pb := PadValue(a), PadValue(b)
	got := h.Block(blk, []kv.Identity{a, b}, BaseSeed, nil)
	want := HashTokens([]uint32{pa, pa, 20, 7, 19, pb, pb, pb}, BaseSeed)
	if got.Kind != Normalized || got.Hash != want || got.Runs != 2 || got.Objects != 2 {
		t.Errorf("two items: %+v, want normalized %d", got, want)
	}
	got = h.Block(blk, []kv.Identity{a}, BaseSeed, nil)
	if got.Kind != Boundary || got.Hash != HashBoundary(blk, []kv.Identity{a}, BaseSeed) || got.Objects != 2 {
		t.Errorf("one item, two runs: %+v, want boundary", got)
	}
	one := []uint32{7, 19, 18, 18, 18, 18, 18, 18}
	got = h.Block(one, []kv.Identity{a}, BaseSeed, nil)
	if got.Kind != Normalized || got.Hash != HashTokens([]uint32{7, 19, pa, pa, pa, pa, pa, pa}, BaseSeed) {
		t.Errorf("one run: %+v, want normalized", got)
	}
}

func TestHashPromptErrors(t *testing.T) {
	toks := make([]uint32, 40)
	for _, tc := range []struct {
		name  string
		cfg   Config
		spans []Span
		want  error
	}{
		{"zero block size", Config{}, nil, ErrConfig},
		{"negative block size", Config{BlockSize: -1}, nil, ErrConfig},
		{"span past end", qwen, []Span{{Start: 30, End: 41}}, ErrSpans},
		{"empty span", qwen, []Span{{Start: 3, End: 3}}, ErrSpans},
		{"overlap", qwen, []Span{{Start: 3, End: 10}, {Start: 9, End: 12}}, ErrSpans},
		{"negative start", qwen, []Span{{Start: -1, End: 2}}, ErrSpans},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := HashPrompt(tc.cfg, BaseSeed, toks, tc.spans); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if _, err := HashBlocks(tc.cfg, BaseSeed, toks, tc.spans); !errors.Is(err, tc.want) {
				t.Errorf("HashBlocks err = %v, want %v", err, tc.want)
			}
		})
	}
	p, err := HashPrompt(qwen, BaseSeed, toks[:15], nil)
	if err != nil || len(p.Blocks) != 0 || len(p.RoutingTokens) != 0 {
		t.Errorf("partial block only: %+v %v", p, err)
	}
}

// benchPrompt is an 8k-token prompt with a video (16 groups of 80 pads after 6 timestamp tokens)
// and an image.
func benchPrompt() ([]uint32, []Span) {
	toks := make([]uint32, 0, 8192)
	for len(toks) < 1000 {
		toks = append(toks, uint32(len(toks)*7%150000))
	}
	vs := len(toks)
	for g := 0; g < 16; g++ {
		toks = append(toks, 27, 15, 13, 18, 6486, 29, 151652)
		for i := 0; i < 80; i++ {
			toks = append(toks, 151656)
		}
		toks = append(toks, 151653)
	}
	ve := len(toks)
	toks = append(toks, 151653, 151652)
	is := len(toks)
	for i := 0; i < 1024; i++ {
		toks = append(toks, 151655)
	}
	ie := len(toks)
	for len(toks) < 8192 {
		toks = append(toks, uint32(len(toks)*13%150000))
	}
	return toks, []Span{{Start: vs, End: ve, Identity: 0x1234, Kind: Video}, {Start: is, End: ie, Identity: 0x5678, Kind: Image}}
}

func BenchmarkHashPrompt(b *testing.B) {
	toks, spans := benchPrompt()
	h, _ := NewHasher(qwen)
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(toks)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.Prompt(toks, spans, BaseSeed); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(toks)/qwen.BlockSize)/b.Elapsed().Seconds(), "blocks/s")
}

// BenchmarkHashBlocks is BenchmarkHashPrompt's input through the router's path (hashes only),
// with its media spans (media) and as a text prompt of the same tokens (text: no spans, every
// block plain).
func BenchmarkHashBlocks(b *testing.B) {
	toks, spans := benchPrompt()
	for _, tc := range []struct {
		name  string
		spans []Span
	}{{"media", spans}, {"text", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(4 * len(toks)))
			for i := 0; i < b.N; i++ {
				if _, err := HashBlocks(qwen, BaseSeed, toks, tc.spans); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*float64(len(toks)/qwen.BlockSize)/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

// TestHashBlocksTextIsBlockRule: a prompt without media spans hashes each complete block as
// Hasher.Block does with no identities (the Plain kind), at block sizes across xxh3's size
// classes (≤ 16, 17–128, 129–240 and longer inputs), with the partial tail left out.
func TestHashBlocksTextIsBlockRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	toks := make([]uint32, 5000)
	for i := range toks {
		toks[i] = rng.Uint32()
	}
	for _, bs := range []int{1, 3, 4, 5, 16, 32, 33, 60, 61, 64, 256} {
		cfg := Config{BlockSize: bs, ImagePad: qwen.ImagePad, VideoPad: qwen.VideoPad}
		h, err := NewHasher(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, bs - 1, bs, len(toks)} {
			got, err := HashBlocks(cfg, SeedFor("", "salt"), toks[:n], nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n/bs {
				t.Fatalf("block size %d, %d tokens: %d hashes, want %d", bs, n, len(got), n/bs)
			}
			for b, g := range got {
				want := h.Block(toks[b*bs:(b+1)*bs], nil, SeedFor("", "salt"), nil)
				if want.Kind != Plain || g != want.Hash {
					t.Fatalf("block size %d, block %d: %#x, want %#x (%s)", bs, b, g, want.Hash, want.Kind)
				}
			}
		}
	}
}

// BenchmarkBlock is the per-block cost of the three kinds (16-token blocks).
func BenchmarkBlock(b *testing.B) {
	h, _ := NewHasher(qwen)
	text := make([]uint32, 16)
	video := make([]uint32, 16)
	for i := range text {
		text[i] = uint32(1000 + i)
		video[i] = 151656
	}
	runless := []uint32{151653, 27, 15, 13, 18, 6486, 29, 151652, 27, 16, 13, 18, 6486, 29, 151652, 5}
	for _, tc := range []struct {
		name string
		toks []uint32
		ids  []kv.Identity
	}{{"plain", text, nil}, {"normalized", video, []kv.Identity{42}}, {"boundary", runless, []kv.Identity{42, 7}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				h.Block(tc.toks, tc.ids, BaseSeed, nil)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "blocks/s")
		})
	}
}

// TestTokensHashedAsLittleEndian: the in-place hash of a block's tokens is the hash of le_u32
// bytes written one by one (DESIGN.md §5), for lengths around xxh3's size classes.
func TestTokensHashedAsLittleEndian(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for _, n := range []int{0, 1, 3, 4, 16, 31, 32, 60, 64, 256, 1056} {
		toks := make([]uint32, n)
		var le []byte
		for i := range toks {
			toks[i] = rng.Uint32()
			le = binary.LittleEndian.AppendUint32(le, toks[i])
		}
		want := xxh3.HashSeed(le, BaseSeed)
		if got, _ := hashTokensInto(nil, toks, BaseSeed); got != want {
			t.Errorf("%d tokens: %x, le_u32 bytes hash to %x", n, got, want)
		}
		if got := HashTokens(toks, BaseSeed); uint64(got) != want {
			t.Errorf("HashTokens, %d tokens: %x, want %x", n, got, want)
		}
	}
}

// TestHashBlock16MatchesXXH3: the written-out 16-token hash equals zeebo/xxh3 over the block's
// le_u32 bytes, on random blocks and seeds (including 0 and the seeds a salt and LoRA give).
func TestHashBlock16MatchesXXH3(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 17))
	seeds := []uint64{0, BaseSeed, SeedFor("lora", "salt"), ^uint64(0)}
	for i := 0; i < 20000; i++ {
		var blk [16]uint32
		for j := range blk {
			blk[j] = rng.Uint32()
			if i%3 == 0 {
				blk[j] %= 152000 // vocabulary-sized ids
			}
		}
		var le []byte
		for _, tok := range blk {
			le = binary.LittleEndian.AppendUint32(le, tok)
		}
		seed := seeds[i%len(seeds)]
		if i >= 4*len(seeds) {
			seed = rng.Uint64()
		}
		if got, want := hashBlock16(&blk, seed), xxh3.HashSeed(le, seed); got != want {
			t.Fatalf("block %v seed %#x: %#x, want %#x", blk, seed, got, want)
		}
	}
}

// TestHashRunsIsHashBlocks: tokens cut into runs at random points (empty runs, runs shorter than
// a block, blocks spanning three runs) hash to HashBlocks of the joined tokens, at several
// block sizes.
func TestHashRunsIsHashBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	for _, bs := range []int{1, 4, 16, 17, 64} {
		cfg := Config{BlockSize: bs, ImagePad: qwen.ImagePad, VideoPad: qwen.VideoPad}
		for trial := 0; trial < 200; trial++ {
			toks := make([]uint32, rng.IntN(600))
			for i := range toks {
				toks[i] = rng.Uint32() % 152000
			}
			var runs [][]uint32
			for rest := toks; len(rest) > 0 || rng.IntN(4) == 0; {
				k := min(len(rest), rng.IntN(2*bs+3))
				runs = append(runs, rest[:k])
				rest = rest[k:]
				if len(rest) == 0 && rng.IntN(2) == 0 {
					break
				}
			}
			want, err := HashBlocks(cfg, BaseSeed, toks, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, n, err := HashRuns(cfg, BaseSeed, runs, nil)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(toks) || !slices.Equal(got, want) {
				t.Fatalf("block size %d, %d tokens in %d runs: %d tokens, hashes %v, want %v", bs, len(toks), len(runs), n, got, want)
			}
			// Through a memo: the first call stores each run's inner blocks, the second loads
			// them (the runs' tokens unread), and both give the same hashes.
			memo := &mapMemo{m: map[[2]int][]kv.BlockHash{}}
			for pass := 0; pass < 2; pass++ {
				got, _, err := HashRuns(cfg, BaseSeed, runs, memo)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("block size %d, memo pass %d: hashes %v, want %v (err %v)", bs, pass, got, want, err)
				}
			}
			if memo.stores != memo.loads {
				t.Fatalf("block size %d: %d runs stored, %d loaded on the second pass", bs, memo.stores, memo.loads)
			}
		}
	}
	if _, _, err := HashRuns(Config{}, BaseSeed, nil, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("block size 0: %v, want ErrConfig", err)
	}
}

// mapMemo is a RunMemo over a map, counting what it stored and loaded.
type mapMemo struct {
	m             map[[2]int][]kv.BlockHash
	stores, loads int
}

func (m *mapMemo) Load(run, skip int, dst []kv.BlockHash) bool {
	h, ok := m.m[[2]int{run, skip}]
	if !ok || len(h) != len(dst) {
		return false
	}
	copy(dst, h)
	m.loads++
	return true
}

func (m *mapMemo) Store(run, skip int, hashes []kv.BlockHash) {
	m.m[[2]int{run, skip}] = slices.Clone(hashes)
	m.stores++
}
