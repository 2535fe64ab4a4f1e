package picture_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"testing"

	"github.com/kvroute/kvroute/media/picture"
	"github.com/kvroute/kvroute/reason"
)

// readPNM reads a binary PPM (P6) or PGM (P5) with maxval 255 as packed RGB (gray replicated).
func readPNM(t *testing.T, data []byte) (w, h int, rgb []byte) {
	t.Helper()
	var magic string
	var maxval int
	r := bytes.NewReader(data)
	if _, err := fmt.Fscan(r, &magic, &w, &h, &maxval); err != nil || maxval != 255 {
		t.Fatalf("PNM header: %v (maxval %d)", err, maxval)
	}
	_, _ = r.ReadByte() // the single white space before the samples
	px := data[len(data)-r.Len():]
	switch magic {
	case "P6":
		return w, h, px[:3*w*h]
	case "P5":
		rgb = make([]byte, 0, 3*w*h)
		for _, g := range px[:w*h] {
			rgb = append(rgb, g, g, g)
		}
		return w, h, rgb
	}
	t.Fatalf("PNM magic %q", magic)
	return
}

// TestImageJPEGAsPillow: a JPEG's identity is taken over the pixels libjpeg-turbo gives with
// Pillow's settings (ISLOW IDCT, fancy upsampling, RGB out), checked against the reference
// decode of libjpeg-turbo's own djpeg 2.1.5 (testdata/SOURCE.md): a 4:2:0 colour JPEG and a
// grayscale one (gray replicated into RGB, Pillow's convert("RGB")). Go's image/jpeg gives other
// pixels (nearest-neighbour chroma), hence another identity: the test shows it, so a return to
// Go's decoder cannot pass unnoticed.
func TestImageJPEGAsPillow(t *testing.T) {
	for _, c := range []struct{ jpg, ref string }{{"picture.jpg", "picture_jpg.ppm"}, {"picture_gray.jpg", "picture_gray_jpg.pgm"}} {
		data := readImage(t, c.jpg)
		w, h, rgb := readPNM(t, readImage(t, c.ref))
		info, err := picture.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", c.jpg, err)
		}
		if want := canonicalHash(w, h, rgb); info.Identity != want || info.Width != w || info.Height != h {
			t.Fatalf("%s: identity %v %dx%d, want djpeg's %v %dx%d", c.jpg, info.Identity, info.Width, info.Height, want, w, h)
		}
		if c.jpg != "picture.jpg" {
			continue
		}
		img, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		goRGB := make([]byte, 0, 3*w*h)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yc := img.(*image.YCbCr).YCbCrAt(x, y)
				r, g, b := color.YCbCrToRGB(yc.Y, yc.Cb, yc.Cr)
				goRGB = append(goRGB, r, g, b)
			}
		}
		if canonicalHash(w, h, goRGB) == info.Identity {
			t.Fatal("Go's image/jpeg pixels give the same identity: the fixture does not tell the decoders apart")
		}
	}
}

// TestImageJPEGBroken: a JPEG cut short is 400 media_undecodable (Pillow refuses a truncated
// file too: "image file is truncated"), never a panic or a partial image. One whose scan data is
// overwritten decodes as libjpeg (and so Pillow, which ignores libjpeg's warnings) decodes it, to
// the same identity every time.
func TestImageJPEGBroken(t *testing.T) {
	data := readImage(t, "picture.jpg")
	if _, err := picture.Decode(data[:len(data)*2/3]); reason.CodeOf(err) != reason.MediaUndecodable {
		t.Fatalf("truncated JPEG: %v, want media_undecodable", err)
	}
	bad := bytes.Clone(data)
	for i := len(bad) / 2; i < len(bad)-2; i++ {
		bad[i] = 0xff
	}
	a, err1 := picture.Decode(bad)
	b, err2 := picture.Decode(bad)
	if err1 != nil || err2 != nil || *a != *b {
		t.Fatalf("corrupt scan data: %v / %v, %v / %v: want one identity", a, b, err1, err2)
	}
}
