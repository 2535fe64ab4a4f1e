package layout_test

import (
	"testing"

	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/routing/layout"
)

func BenchmarkLayoutVideo(b *testing.B) {
	c := mustParse(b, exampleContract)
	in := layout.VideoInput{TotalFrames: 36000, SourceFPS: 60, Width: 1920, Height: 1080}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := layout.LayoutVideo(c, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDigest(b *testing.B) {
	c := mustParse(b, exampleContract)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Digest(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExpand(b *testing.B) {
	tok := realTokenizer(b)
	const prompt = "<|im_start|>user\n<|vision_start|><|video_pad|><|vision_end|>Describe this video.<|im_end|>\n<|im_start|>assistant\n"
	for _, mode := range []string{layout.TimestampsSpliced, layout.TimestampsWhole} {
		b.Run(mode, func(b *testing.B) {
			c := mustParse(b, exampleContract)
			c.TimestampTokenization = mode
			a, err := layout.NewQwen3VL(c, nil, tok)
			if err != nil {
				b.Fatal(err)
			}
			l, err := a.VideoLayout(layout.VideoInput{TotalFrames: 300, SourceFPS: 30, Width: 640, Height: 360})
			if err != nil {
				b.Fatal(err)
			}
			media := []layout.Media{{Kind: blocks.Video, Identity: 1, Video: l}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.Expand(prompt, media); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
