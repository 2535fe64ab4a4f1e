package picture_test

import (
	"bytes"
	"image"
	"image/color"
	"image/color/palette"
	"testing"

	"golang.org/x/image/tiff"

	"github.com/kvroute/kvroute/media/picture"
)

// TestTIFFGrayPalettedDecode: grayscale (8- and 16-bit) and paletted TIFFs (x/image/tiff's
// encoder, deflate and uncompressed) decode, and to the identity of the same pixels as RGB: a
// gray value v is the pixel (v, v, v), a 16-bit one its high byte, a palette index its colour.
func TestTIFFGrayPalettedDecode(t *testing.T) {
	const w, h = 9, 7
	gray := image.NewGray(image.Rect(0, 0, w, h))
	gray16 := image.NewGray16(image.Rect(0, 0, w, h))
	pal := image.NewPaletted(image.Rect(0, 0, w, h), palette.WebSafe)
	want := image.NewRGBA(image.Rect(0, 0, w, h))
	want16 := image.NewRGBA(image.Rect(0, 0, w, h))
	wantPal := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			v := uint8(x*29 + y*13)
			gray.SetGray(x, y, color.Gray{v})
			want.Set(x, y, color.RGBA{v, v, v, 255})
			v16 := uint16(x)*7001 + uint16(y)*311
			gray16.SetGray16(x, y, color.Gray16{v16})
			want16.Set(x, y, color.RGBA{uint8(v16 >> 8), uint8(v16 >> 8), uint8(v16 >> 8), 255})
			i := uint8((x*5 + y*11) % len(palette.WebSafe))
			pal.SetColorIndex(x, y, i)
			wantPal.Set(x, y, palette.WebSafe[i])
		}
	}
	for _, c := range []struct {
		name string
		img  image.Image
		want *image.RGBA
	}{{"gray", gray, want}, {"gray16", gray16, want16}, {"paletted", pal, wantPal}} {
		for _, comp := range []tiff.CompressionType{tiff.Uncompressed, tiff.Deflate} {
			var buf bytes.Buffer
			if err := tiff.Encode(&buf, c.img, &tiff.Options{Compression: comp}); err != nil {
				t.Fatal(err)
			}
			got, err := picture.Decode(buf.Bytes())
			if err != nil {
				t.Fatalf("%s (compression %d): %v", c.name, comp, err)
			}
			if id := canonicalHash(w, h, rgbOf(c.want)); got.Identity != id || got.Width != w || got.Height != h {
				t.Errorf("%s (compression %d): %dx%d identity %s, want %s", c.name, comp, got.Width, got.Height, got.Identity.Hex(), id.Hex())
			}
		}
	}
}
