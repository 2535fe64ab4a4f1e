package picture

import (
	"bytes"
	"image"
	"image/jpeg"
	"runtime"
	"sync"
	"testing"
)

// BenchmarkImagesOfOneRequest: a request's distinct images are identified at once (router
// resolveAll runs one goroutine per distinct part; libjpeg-turbo, libpng and libwebp run in cgo
// calls on their own threads, the Go decoders on the scheduler's GOMAXPROCS), against one after
// the other, on GOMAXPROCS distinct 1920×1080 JPEGs: the ratio is how many cores one request's
// decoding uses (at most GOMAXPROCS on an idle machine). One image is not split (docs/benchmarks.md).
func BenchmarkImagesOfOneRequest(b *testing.B) {
	n := runtime.GOMAXPROCS(0)
	imgs := make([][]byte, n)
	for k := range imgs {
		m := image.NewYCbCr(image.Rect(0, 0, 1920, 1080), image.YCbCrSubsampleRatio420)
		for i := range m.Y {
			m.Y[i] = uint8(i*(k+3)/7 + i/1920)
		}
		for i := range m.Cb {
			m.Cb[i], m.Cr[i] = uint8(i/(k+5)), uint8(200-i/960)
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 92}); err != nil {
			b.Fatal(err)
		}
		imgs[k] = buf.Bytes()
	}
	b.Run("one_after_the_other", func(b *testing.B) {
		for b.Loop() {
			for _, d := range imgs {
				if _, err := Decode(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("at_once", func(b *testing.B) {
		for b.Loop() {
			var wg sync.WaitGroup
			for _, d := range imgs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := Decode(d); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
		}
	})
}
