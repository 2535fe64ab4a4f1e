package picture

import (
	"bytes"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// photo4K is a 3840×2160 4:2:0 JPEG at quality 95 (about 6 MB: a smooth scene with fine noise).
func photo4K(tb testing.TB) []byte {
	const w, h = 3840, 2160
	img := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	r := rand.New(rand.NewPCG(4, 2))
	for i := range img.Y {
		img.Y[i] = uint8(i%w*255/w/2 + i/w*255/h/2 + r.IntN(48))
	}
	for i := range img.Cb {
		img.Cb[i] = uint8(96 + i%64 + r.IntN(16))
		img.Cr[i] = uint8(160 - i%50 + r.IntN(16))
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkImage4KJPEG compares, in one run, a cold 4K JPEG's identity by the previous decoder
// (Go's image/jpeg, canvasPixels, the hash), by DecodeImage (libjpeg-turbo), and its
// image_identity bytes cost (XXH3-128 of the bytes and the header): docs/benchmarks.md.
func BenchmarkImage4KJPEG(b *testing.B) {
	data := photo4K(b)
	b.Run("go_image_jpeg", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			img, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			px := canvasPixels(img, img.Bounds())
			h := xxh3.New()
			for y := 0; y < px.h; y++ {
				_, _ = h.Write(px.row(y))
			}
		}
	})
	b.Run("libjpeg_turbo", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bytes_identity", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Header(data, xxh3.Hash128(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
