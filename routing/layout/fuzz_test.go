package layout_test

import (
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/layout"
)

// FuzzParseContract checks that parsing never panics, and that a valid contract's canonical form
// parses back to a contract with the same digest.
func FuzzParseContract(f *testing.F) {
	f.Add([]byte(exampleContract))
	f.Add([]byte(`{"schema": "kvroute.video_contract/v1", "sampler": {"kind": "sglang"}}`))
	f.Add([]byte(`{"resize": {"min_pixels": 1e400}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := layout.ParseContract(doc)
		if err != nil || c.Validate() != nil {
			return
		}
		d, err := c.Digest()
		if err != nil {
			t.Fatalf("digest of a valid contract: %v", err)
		}
		canon, err := c.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		c2, err := layout.ParseContract(canon)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, canon)
		}
		if err := c2.Validate(); err != nil {
			t.Fatalf("canonical form does not validate: %v", err)
		}
		if d2, _ := c2.Digest(); d2 != d {
			t.Fatalf("digest changed through the canonical form: %s vs %s", d, d2)
		}
	})
}

// FuzzExpand checks that expanding any prompt never panics and that a successful expansion has
// ordered, in-range spans holding exactly each item's pads.
func FuzzExpand(f *testing.F) {
	tok := realTokenizer(f)
	f.Add("<|im_start|>user\nLook:<|vision_start|><|video_pad|><|vision_end|>x<|vision_start|><|image_pad|><|vision_end|>", uint8(0))
	f.Add("<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|video_pad|><|vision_end|>", uint8(3))
	f.Add("<|video_pad|><|image_pad|>", uint8(1))
	f.Fuzz(func(t *testing.T, prompt string, mode uint8) {
		c := mustParse(t, exampleContract)
		if mode&1 != 0 {
			c.PlaceholderTarget = layout.PlaceholderVisionWrappedVideoToken
		}
		if mode&2 != 0 {
			c.TimestampTokenization = layout.TimestampsWhole
		}
		a, err := layout.NewQwen3VL(c, nil, tok)
		if err != nil {
			t.Fatal(err)
		}
		v, err := a.VideoLayout(layout.VideoInput{TotalFrames: 12, SourceFPS: 3, Width: 64, Height: 64})
		if err != nil {
			t.Fatal(err)
		}
		im, err := a.ImageLayout(64, 64)
		if err != nil {
			t.Fatal(err)
		}
		var media []layout.Media
		for _, k := range []byte(prompt) {
			if len(media) == 3 {
				break
			}
			if k%2 == 0 {
				media = append(media, layout.Media{Kind: blocks.Video, Identity: kv.Identity(k), Video: v})
			} else {
				media = append(media, layout.Media{Kind: blocks.Image, Identity: kv.Identity(k), Image: im})
			}
		}
		ex, err := a.Expand(prompt, media)
		if err != nil {
			return
		}
		prev := 0
		for i, sp := range ex.Spans {
			if sp.Start < prev || sp.End <= sp.Start || sp.End > len(ex.Tokens) {
				t.Fatalf("span %d %+v out of order or range (%d tokens)", i, sp, len(ex.Tokens))
			}
			pad, want := c.TokenIDs.ImagePad, im.Tokens
			if sp.Kind == blocks.Video {
				pad, want = c.TokenIDs.VideoPad, v.VideoPadTokens()
			}
			n := 0
			for _, id := range ex.Tokens[sp.Start:sp.End] {
				if id == pad {
					n++
				}
			}
			if n != want {
				t.Fatalf("span %d holds %d pads, want %d", i, n, want)
			}
			prev = sp.End
		}
	})
}
