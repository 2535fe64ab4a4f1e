package layout_test

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

var (
	tokOnce sync.Once
	tokVal  *tokenizer.Tokenizer
	tokErr  error
)

// realTokenizer loads the test model's tokenizer.json once per test binary.
func realTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tokOnce.Do(func() {
		tokVal, tokErr = tokenizer.Load(goldenDir + "qwen3vl-test-model/tokenizer.json")
	})
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tokVal
}

type tokenRecord struct {
	ID           string   `json:"id"`
	Kind         string   `json:"kind"`
	Source       any      `json:"source"`
	Text         string   `json:"text"`
	IDs          []uint32 `json:"ids"`
	Style        string   `json:"style"`
	SplicedEqual bool     `json:"spliced_equal"`
	IDsSpliced   []uint32 `json:"ids_spliced"`
}

type chatCase struct {
	ID       string `json:"id"`
	Rendered string `json:"rendered"`
}

// goldenTimestampIDs maps every timestamp text of tokens.jsonl to its golden ids.
func goldenTimestampIDs(t *testing.T) map[string][]uint32 {
	t.Helper()
	m := map[string][]uint32{}
	for _, r := range readJSONL[tokenRecord](t, "tokens.jsonl") {
		if r.Kind == "timestamp" {
			m[r.Text] = r.IDs
		}
	}
	return m
}

func adapterFor(t *testing.T, c *layoutCase, target, tokenization string, tok layout.Tokenizer) *layout.Qwen3VL {
	t.Helper()
	ct := contractFor(c)
	ct.PlaceholderTarget, ct.TimestampTokenization = target, tokenization
	a, err := layout.NewQwen3VL(ct, nil, tok)
	if err != nil {
		t.Fatalf("%s: %v", c.ID, err)
	}
	return a
}

func TestTimestampTextsTokenize(t *testing.T) {
	tok := realTokenizer(t)
	ts := goldenTimestampIDs(t)
	if len(ts) != 3213 {
		t.Fatalf("tokens.jsonl has %d timestamp records, want 3213", len(ts))
	}
	matched := 0
	for text, want := range ts {
		if got := tok.Encode(text); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", text, got, want)
			continue
		}
		matched++
	}
	t.Logf("tokens.jsonl timestamps: %d/%d match", matched, len(ts))
	pieces := timestampPieces(t, ts)
	// Every layout.jsonl text with no golden record (about a quarter are held back) is still
	// rebuilt from golden ids by composing its pieces; the composition reproduces every record.
	for text, want := range ts {
		if got := composeTimestamp(t, pieces, text); !slices.Equal(got, want) {
			t.Errorf("composed %q: %v, want %v", text, got, want)
		}
	}
	covered, all := 0, map[string]bool{}
	for _, c := range readJSONL[layoutCase](t, "layout.jsonl") {
		for _, text := range c.Outputs.TimestampTexts {
			all[text] = true
		}
	}
	for text := range all {
		if _, ok := ts[text]; ok {
			covered++
		}
		if got, want := tok.Encode(text), composeTimestamp(t, pieces, text); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v (composed from golden ids)", text, got, want)
		}
	}
	t.Logf("layout.jsonl timestamp texts: %d distinct, %d with a golden record, all equal to the composition", len(all), covered)
}

// composeTimestamp rebuilds the ids of "<d…d.d seconds>" from golden pieces: the ids of "<",
// each digit, ".", " seconds" and ">" as the golden timestamp records give them (the Qwen2
// pre-tokenizer splits every digit on its own, so a record is one id per character of the number).
// A golden record that does not split this way, or two records that disagree on a piece, fail.
func composeTimestamp(t *testing.T, pieces map[string]uint32, text string) []uint32 {
	t.Helper()
	num := text[1 : len(text)-len(" seconds>")]
	out := []uint32{pieces["<"]}
	for k := range len(num) {
		id, ok := pieces[num[k:k+1]]
		if !ok {
			t.Fatalf("no golden id for %q", num[k:k+1])
		}
		out = append(out, id)
	}
	return append(out, pieces[" seconds"], pieces[">"])
}

// timestampPieces collects the piece ids of the golden timestamp records (see composeTimestamp).
func timestampPieces(t *testing.T, ts map[string][]uint32) map[string]uint32 {
	t.Helper()
	pieces := map[string]uint32{}
	put := func(k string, id uint32) {
		if old, ok := pieces[k]; ok && old != id {
			t.Fatalf("golden records disagree on %q: %d and %d", k, old, id)
		}
		pieces[k] = id
	}
	for rec, ids := range ts {
		num := rec[1 : len(rec)-len(" seconds>")]
		if len(ids) != len(num)+3 {
			t.Fatalf("golden %q is %v, not one id per character", rec, ids)
		}
		put("<", ids[0])
		for k := range len(num) {
			put(num[k:k+1], ids[k+1])
		}
		put(" seconds", ids[len(ids)-2])
		put(">", ids[len(ids)-1])
	}
	return pieces
}

// TestReplacementFromGoldenIDs rebuilds every successful layout.jsonl case's replacement from the
// golden timestamp ids and compares it with the adapter's, alone and expanded into a template
// placeholder under both placeholder targets.
func TestReplacementFromGoldenIDs(t *testing.T) {
	tok := realTokenizer(t)
	pieces := timestampPieces(t, goldenTimestampIDs(t))
	const prompt = "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe.<|im_end|>\n"
	head, tail := tok.Encode("<|im_start|>user\n"), tok.Encode("Describe.<|im_end|>\n")
	cases := readJSONL[layoutCase](t, "layout.jsonl")
	matched, total := 0, 0
	for i := range cases {
		c := &cases[i]
		if c.Outputs.Error != "" {
			continue
		}
		total++
		var want []uint32
		for _, text := range c.Outputs.TimestampTexts {
			want = append(want, composeTimestamp(t, pieces, text)...)
			want = append(want, testIDs.VisionStart)
			for range c.Outputs.TokensPerGroup {
				want = append(want, testIDs.VideoPad)
			}
			want = append(want, testIDs.VisionEnd)
		}
		ok := true
		for _, target := range []string{layout.PlaceholderBareVideoToken, layout.PlaceholderVisionWrappedVideoToken} {
			a := adapterFor(t, c, target, layout.TimestampsSpliced, tok)
			l, err := a.VideoLayout(layout.VideoInput{TotalFrames: c.Inputs.TotalFrames, SourceFPS: c.Inputs.SourceFPS,
				Width: c.Inputs.Width, Height: c.Inputs.Height})
			if err != nil {
				t.Fatalf("%s: %v", c.ID, err)
			}
			repl, err := a.VideoReplacement(l)
			if err != nil || !slices.Equal(repl, want) {
				t.Errorf("%s %s: replacement differs (err %v)", c.ID, target, err)
				ok = false
				continue
			}
			ex, err := a.Expand(prompt, []layout.Media{{Kind: blocks.Video, Identity: 7, Video: l}})
			if err != nil {
				t.Fatalf("%s %s: %v", c.ID, target, err)
			}
			full, start, end := appendVideo(slices.Clone(head), target, want)
			full = append(full, tail...)
			wantSpan := []blocks.Span{{Start: start, End: end, Identity: 7, Kind: blocks.Video}}
			if !slices.Equal(ex.Tokens, full) || !reflect.DeepEqual(ex.Spans, wantSpan) {
				t.Errorf("%s %s: expansion differs (spans %v, want %v)", c.ID, target, ex.Spans, wantSpan)
				ok = false
			}
		}
		if ok {
			matched++
		}
	}
	t.Logf("replacements rebuilt from golden ids: %d/%d layout cases match under both targets", matched, total)
}

// TestExpandedPromptGolden reproduces the tokens.jsonl expanded_prompt records in both
// timestamp_tokenization modes.
func TestExpandedPromptGolden(t *testing.T) {
	tok := realTokenizer(t)
	chats := map[string]string{}
	for _, c := range readJSONL[chatCase](t, "chat_template.jsonl") {
		chats[c.ID] = c.Rendered
	}
	layouts := map[string]*layoutCase{}
	lcs := readJSONL[layoutCase](t, "layout.jsonl")
	for i := range lcs {
		layouts[lcs[i].ID] = &lcs[i]
	}
	n := 0
	for _, r := range readJSONL[tokenRecord](t, "tokens.jsonl") {
		if r.Kind != "expanded_prompt" {
			continue
		}
		n++
		src := r.Source.([]any)
		rendered, lc := chats[src[0].(string)], layouts[src[1].(string)]
		target := layout.PlaceholderBareVideoToken
		if r.Style == "legacy" {
			target = layout.PlaceholderVisionWrappedVideoToken
		}
		for _, mode := range []string{layout.TimestampsSpliced, layout.TimestampsWhole} {
			a := adapterFor(t, lc, target, mode, tok)
			l, err := a.VideoLayout(layout.VideoInput{TotalFrames: lc.Inputs.TotalFrames, SourceFPS: lc.Inputs.SourceFPS,
				Width: lc.Inputs.Width, Height: lc.Inputs.Height})
			if err != nil {
				t.Fatalf("%s: %v", r.ID, err)
			}
			ex, err := a.Expand(rendered, []layout.Media{{Kind: blocks.Video, Identity: 0xabc, Video: l}})
			if err != nil {
				t.Fatalf("%s %s: %v", r.ID, mode, err)
			}
			want := r.IDs
			if mode == layout.TimestampsSpliced && !r.SplicedEqual {
				want = r.IDsSpliced
			}
			if !slices.Equal(ex.Tokens, want) {
				t.Errorf("%s %s: %d tokens, want %d", r.ID, mode, len(ex.Tokens), len(want))
				continue
			}
			pre, err := a.ExpandEncoded(rendered, tok.Encode(rendered), []layout.Media{{Kind: blocks.Video, Identity: 0xabc, Video: l}})
			if err != nil || !reflect.DeepEqual(pre, ex) {
				t.Errorf("%s %s: ExpandEncoded differs from Expand (err %v)", r.ID, mode, err)
			}
			if len(ex.Spans) != 1 {
				t.Fatalf("%s %s: spans %v", r.ID, mode, ex.Spans)
			}
			sp := ex.Spans[0]
			if ex.Tokens[sp.End-1] != testIDs.VisionEnd || sp.Identity != 0xabc || sp.Kind != blocks.Video {
				t.Errorf("%s %s: span %+v does not end at a vision_end", r.ID, mode, sp)
			}
			pads := 0
			for _, id := range ex.Tokens[sp.Start:sp.End] {
				if id == testIDs.VideoPad {
					pads++
				}
			}
			if pads != l.VideoPadTokens() {
				t.Errorf("%s %s: span holds %d pads, want %d", r.ID, mode, pads, l.VideoPadTokens())
			}
			if target == layout.PlaceholderBareVideoToken &&
				(ex.Tokens[sp.Start-1] != testIDs.VisionStart || ex.Tokens[sp.End] != testIDs.VisionEnd) {
				t.Errorf("%s %s: the outer vision pair is not around span %+v", r.ID, mode, sp)
			}
			t.Logf("%s %s: %d tokens, span [%d,%d)", r.ID, mode, len(ex.Tokens), sp.Start, sp.End)
		}
	}
	if n != 4 {
		t.Fatalf("tokens.jsonl has %d expanded_prompt records, want 4", n)
	}
}

func TestExpandPlaceholderMismatch(t *testing.T) {
	tok := realTokenizer(t)
	lc := &readJSONL[layoutCase](t, "layout.jsonl")[0]
	vid, err := layout.LayoutVideo(contractFor(lc), layout.VideoInput{TotalFrames: 300, SourceFPS: 30, Width: 640, Height: 360})
	if err != nil {
		t.Fatal(err)
	}
	img := &layout.ImageLayout{ResizedHeight: 352, ResizedWidth: 640, GridTHW: [3]int{1, 22, 40}, Tokens: 220}
	video := layout.Media{Kind: blocks.Video, Video: vid}
	image := layout.Media{Kind: blocks.Image, Image: img}
	const v = "<|vision_start|><|video_pad|><|vision_end|>"
	const i = "<|vision_start|><|image_pad|><|vision_end|>"
	cases := []struct {
		name, target, prompt string
		media                []layout.Media
		code                 reason.Code
	}{
		{"no placeholder", layout.PlaceholderBareVideoToken, "hello", []layout.Media{video}, reason.PlaceholderMismatch},
		{"extra placeholder", layout.PlaceholderBareVideoToken, v + v, []layout.Media{video}, reason.PlaceholderMismatch},
		{"order", layout.PlaceholderBareVideoToken, v + i, []layout.Media{image, video}, reason.PlaceholderMismatch},
		{"bare pad under wrapped target", layout.PlaceholderVisionWrappedVideoToken, "x<|video_pad|>y", []layout.Media{video}, reason.PlaceholderMismatch},
		{"incomplete video layout", layout.PlaceholderBareVideoToken, v, []layout.Media{{Kind: blocks.Video, Video: &layout.VideoLayout{}}}, reason.LayoutError},
		{"missing image layout", layout.PlaceholderBareVideoToken, i, []layout.Media{{Kind: blocks.Image}}, reason.LayoutError},
	}
	for _, c := range cases {
		for _, mode := range []string{layout.TimestampsSpliced, layout.TimestampsWhole} {
			a := adapterFor(t, lc, c.target, mode, tok)
			_, err := a.Expand(c.prompt, c.media)
			if got := reason.CodeOf(err); got != c.code {
				t.Errorf("%s %s: code %q (err %v), want %q", c.name, mode, got, err, c.code)
			}
		}
	}
}

func TestExpandMixedMedia(t *testing.T) {
	tok := realTokenizer(t)
	lc := &readJSONL[layoutCase](t, "layout.jsonl")[0]
	prompt := "<|im_start|>user\nA<|vision_start|><|image_pad|><|vision_end|>B<|vision_start|><|video_pad|><|vision_end|>" +
		"C<|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
	for _, mode := range []string{layout.TimestampsSpliced, layout.TimestampsWhole} {
		for _, target := range []string{layout.PlaceholderBareVideoToken, layout.PlaceholderVisionWrappedVideoToken} {
			a := adapterFor(t, lc, target, mode, tok)
			vid, err := a.VideoLayout(layout.VideoInput{TotalFrames: 300, SourceFPS: 30, Width: 640, Height: 360})
			if err != nil {
				t.Fatal(err)
			}
			img1, err := a.ImageLayout(640, 360)
			if err != nil {
				t.Fatal(err)
			}
			img2, err := a.ImageLayout(100, 100)
			if err != nil {
				t.Fatal(err)
			}
			if img1.Tokens != 220 || img2.Tokens != 64 {
				t.Fatalf("image tokens %d, %d, want 220, 64", img1.Tokens, img2.Tokens)
			}
			media := []layout.Media{{Kind: blocks.Image, Identity: 1, Image: img1}, {Kind: blocks.Video, Identity: 2, Video: vid},
				{Kind: blocks.Image, Identity: 1, Image: img2}}
			ex, err := a.Expand(prompt, media)
			if err != nil {
				t.Fatalf("%s %s: %v", mode, target, err)
			}
			repl, err := a.VideoReplacement(vid)
			if err != nil {
				t.Fatal(err)
			}
			var want []uint32
			want = append(want, tok.Encode("<|im_start|>user\nA<|vision_start|>")...)
			s0 := len(want)
			want = appendRun(want, testIDs.ImagePad, 220)
			e0 := len(want)
			want = append(want, tok.Encode("<|vision_end|>B")...)
			want, s1, e1 := appendVideo(want, target, repl)
			want = append(want, tok.Encode("C<|vision_start|>")...)
			s2 := len(want)
			want = appendRun(want, testIDs.ImagePad, 64)
			e2 := len(want)
			want = append(want, tok.Encode("<|vision_end|><|im_end|>\n")...)
			wantSpans := []blocks.Span{{Start: s0, End: e0, Identity: 1, Kind: blocks.Image},
				{Start: s1, End: e1, Identity: 2, Kind: blocks.Video}, {Start: s2, End: e2, Identity: 1, Kind: blocks.Image}}
			if !slices.Equal(ex.Tokens, want) || !reflect.DeepEqual(ex.Spans, wantSpans) {
				t.Errorf("%s %s: spans %v, want %v (tokens equal: %v)", mode, target, ex.Spans, wantSpans, slices.Equal(ex.Tokens, want))
			}
		}
	}
}

func appendRun(out []uint32, id uint32, n int) []uint32 {
	for range n {
		out = append(out, id)
	}
	return out
}

func TestNewQwen3VLChecks(t *testing.T) {
	tok := realTokenizer(t)
	lc := &readJSONL[layoutCase](t, "layout.jsonl")[0]
	ct := contractFor(lc)
	ct.TokenIDs.VideoPad = 151654 // <|vision_pad|>: the tokenizer disagrees
	if _, err := layout.NewQwen3VL(ct, nil, tok); !errors.Is(err, layout.ErrInvalidContract) {
		t.Errorf("wrong video pad id: err %v, want ErrInvalidContract", err)
	}
	ct = contractFor(lc)
	ct.ImageResize = nil
	if _, err := layout.NewQwen3VL(ct, nil, tok); !errors.Is(err, layout.ErrInvalidContract) {
		t.Errorf("no image budget: err %v, want ErrInvalidContract", err)
	}
	m, err := layout.LoadModel(goldenDir + "qwen3vl-test-model")
	if err != nil {
		t.Fatal(err)
	}
	a, err := layout.NewQwen3VL(ct, m, tok)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := a.ImageLayout(1920, 1080); err != nil || l.Tokens != 2040 {
		t.Errorf("model image budget: %+v, %v; want 2040 tokens", l, err)
	}
	if _, err := a.ImageLayout(6432, 32); reason.CodeOf(err) != reason.LayoutError || layout.StageOf(err) != layout.StageSmartResize {
		t.Errorf("aspect 201: err %v, want layout_error at smart_resize", err)
	}
	if _, err := a.VideoLayout(layout.VideoInput{TotalFrames: 1, SourceFPS: 30, Width: 640, Height: 360}); reason.CodeOf(err) != reason.LayoutError {
		t.Errorf("one frame: err %v, want layout_error", err)
	}
}

// appendVideo appends a video's replacement as the prompt holds it under placeholder target (the
// bare video token's replacement is wrapped in <|vision_start|> … <|vision_end|>) and returns the
// replacement's span [start, end).
func appendVideo(dst []uint32, target string, repl []uint32) (out []uint32, start, end int) {
	if target == layout.PlaceholderBareVideoToken {
		dst = append(dst, testIDs.VisionStart)
	}
	start = len(dst)
	dst = append(dst, repl...)
	end = len(dst)
	if target == layout.PlaceholderBareVideoToken {
		dst = append(dst, testIDs.VisionEnd)
	}
	return dst, start, end
}
