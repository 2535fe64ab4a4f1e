package picture_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/png"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/imagetest"
	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"
	"golang.org/x/image/tiff"

	"github.com/kvroute/kvroute/media/picture"
	"github.com/kvroute/kvroute/reason"
)

// imageDir holds the image fixtures made by ffmpeg (testdata/SOURCE.md, "image/").
var imageDir = imagetest.Dir() + "/"

func readImage(t *testing.T, name string) []byte { return imagetest.Read(t, name) }

// canonicalHash is Dynamo's canonical_content_hash of an H×W×3 u8 array, written here from the
// layout (u64le rank 3, u64le H, W, 3, u8 dtype 0, the packed rows), independent of the resolver.
func canonicalHash(w, h int, rgb []byte) kv.Identity { return canonicalHashC(w, h, 3, rgb) }

// canonicalHashC is canonicalHash of an H×W×c array.
func canonicalHashC(w, h, c int, rgb []byte) kv.Identity {
	var b bytes.Buffer
	for _, v := range []uint64{3, uint64(h), uint64(w), uint64(c)} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteByte(0)
	b.Write(rgb)
	return kv.Identity(xxh3.Hash(b.Bytes()))
}

// TestImageFormatsSamePixels: the 67×45 test picture as PNG, lossless WebP, BMP and TIFF decodes
// to exactly 67×45 and to the identity of ffmpeg's own rgb24 decode of the PNG (picture.rgb), so
// the four decoders give the same pixels byte for byte.
func TestImageFormatsSamePixels(t *testing.T) {
	const w, h = 67, 45
	raw := readImage(t, "picture.rgb")
	if len(raw) != w*h*3 {
		t.Fatalf("picture.rgb has %d bytes", len(raw))
	}
	want := canonicalHash(w, h, raw)
	for _, name := range []string{"picture.png", "picture_lossless.webp", "picture.bmp", "picture.tiff"} {
		got, err := picture.Decode(readImage(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Width != w || got.Height != h || got.Identity != want {
			t.Errorf("%s: %dx%d identity %s, want %dx%d identity %s", name, got.Width, got.Height, got.Identity.Hex(), w, h, want.Hex())
		}
	}
}

// TestImageLossyWebP: the lossy WebP decodes to 67×45 (odd sizes: the 4:2:0 chroma planes are
// 34×23) and its identity is that of Pillow's RGB decode (webp_pillow/picture_lossy.rgb: libwebp's
// conversion with fancy upsampling, the worker's pixels). It is no longer Go's YCbCr→RGB of the
// same YUV samples (FFmpeg's VP8 decode, picture_lossy.yuv), the identity before lossy WebP went
// to libwebp.
func TestImageLossyWebP(t *testing.T) {
	const w, h = 67, 45
	yuv := readImage(t, "picture_lossy.yuv")
	const cw, ch = (w + 1) / 2, (h + 1) / 2
	if len(yuv) != w*h+2*cw*ch {
		t.Fatalf("picture_lossy.yuv has %d bytes", len(yuv))
	}
	ycc := &image.YCbCr{
		Y: yuv[:w*h], Cb: yuv[w*h : w*h+cw*ch], Cr: yuv[w*h+cw*ch:],
		YStride: w, CStride: cw, SubsampleRatio: image.YCbCrSubsampleRatio420, Rect: image.Rect(0, 0, w, h),
	}
	rgba := image.NewRGBA(ycc.Rect)
	draw.Draw(rgba, rgba.Rect, ycc, image.Point{}, draw.Src)
	goID := canonicalHash(w, h, rgbOf(rgba))
	pillow := readImage(t, "webp_pillow/picture_lossy.rgb")
	if len(pillow) != w*h*3 {
		t.Fatalf("picture_lossy.rgb has %d bytes", len(pillow))
	}
	want := canonicalHash(w, h, pillow)
	if want == goID {
		t.Fatal("Pillow's pixels hash as Go's conversion: the fixture cannot tell the decoders apart")
	}
	for i := 0; i < 2; i++ { // the same bytes twice: the same identity
		got, err := picture.Decode(readImage(t, "picture_lossy.webp"))
		if err != nil {
			t.Fatal(err)
		}
		if got.Width != w || got.Height != h || got.Identity != want {
			t.Fatalf("got %dx%d identity %s, want %dx%d identity %s", got.Width, got.Height, got.Identity.Hex(), w, h, want.Hex())
		}
	}
	// the same pixels as a PNG (Pillow's decode, re-encoded here): the same identity
	rgbaP := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		copy(rgbaP.Pix[4*i:4*i+3], pillow[3*i:3*i+3])
		rgbaP.Pix[4*i+3] = 0xff
	}
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, rgbaP); err != nil {
		t.Fatal(err)
	}
	if got, err := picture.Decode(pngBuf.Bytes()); err != nil || got.Identity != want {
		t.Fatalf("a PNG of the lossy WebP's pixels: %v %v, want identity %s", got, err, want.Hex())
	}
	lossless, err := picture.Decode(readImage(t, "picture_lossless.webp"))
	if err != nil {
		t.Fatal(err)
	}
	if lossless.Identity == want {
		t.Fatal("lossy and lossless WebP of the picture hash alike: the lossy pixels cannot equal the source")
	}
}

func rgbOf(m *image.RGBA) []byte {
	var out []byte
	for y := 0; y < m.Rect.Dy(); y++ {
		for x := 0; x < m.Rect.Dx(); x++ {
			i := y*m.Stride + 4*x
			out = append(out, m.Pix[i], m.Pix[i+1], m.Pix[i+2])
		}
	}
	return out
}

// TestImageGIFFrameOffset: a GIF whose first frame covers part of its logical screen has the
// screen's size (what PIL reports, and what the token count must come from), the frame drawn at
// its offset, the rest transparent (so the picture hashes as straight RGBA).
func TestImageGIFFrameOffset(t *testing.T) {
	const sw, sh = 10, 8
	frame := image.NewPaletted(image.Rect(5, 4, 9, 7), color.Palette{color.RGBA{0, 0, 0, 255}, color.RGBA{200, 30, 90, 255}})
	for i := range frame.Pix {
		frame.Pix[i] = 1
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0},
		Config: image.Config{ColorModel: frame.Palette, Width: sw, Height: sh}}); err != nil {
		t.Fatal(err)
	}
	rgba := make([]byte, sw*sh*4)
	for y := 4; y < 7; y++ {
		for x := 5; x < 9; x++ {
			copy(rgba[(y*sw+x)*4:], []byte{200, 30, 90, 255})
		}
	}
	got, err := picture.Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if want := canonicalHashC(sw, sh, 4, rgba); got.Width != sw || got.Height != sh || got.Identity != want {
		t.Fatalf("got %+v, want %dx%d identity %s", got, sw, sh, want.Hex())
	}
}

// TestImageUnsupportedFormats: image formats the worker's PIL opens and kvroute does not decode
// fall back (unsupported_codec: forwarded unchanged), like an H.264 video.
func TestImageUnsupportedFormats(t *testing.T) {
	// A hand-built HEIC start: an ftyp box, major brand heic, compatible mif1 and heic.
	heic := append([]byte("\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic"), make([]byte, 32)...)
	// An AVIF whose major brand is mif1 and whose compatible brands name avif.
	mif1 := append([]byte("\x00\x00\x00\x1cftypmif1\x00\x00\x00\x00mif1miafavif"), make([]byte, 32)...)
	badRLE := readImage(t, "picture.bmp")
	badRLE = append([]byte(nil), badRLE...)
	binary.LittleEndian.PutUint32(badRLE[30:], 1) // biCompression BI_RLE8 on a 24-bit bitmap
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"picture.avif", readImage(t, "picture.avif"), "the image is AVIF"},
		{"picture.jp2", readImage(t, "picture.jp2"), "the image is JPEG 2000"},
		{"picture.ico", readImage(t, "picture.ico"), "the image is ICO"},
		{"animated.webp", readImage(t, "animated.webp"), "the image is animated WebP"},
		{"heic ftyp", heic, "the image is HEIC"},
		{"mif1 ftyp with avif", mif1, "the image is HEIF"},
		{"bigtiff", []byte("II+\x00\x08\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00"), "the image is BigTIFF"},
		{"jpeg 2000 codestream", []byte("\xff\x4f\xff\x51\x00\x2f\x00\x00"), "the image is JPEG 2000"},
		{"rle bmp", badRLE, "decoding the BMP image: a variant kvroute does not decode"},
	} {
		_, err := picture.Decode(c.data)
		if reason.CodeOf(err) != reason.UnsupportedCodec || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want unsupported_codec %q", c.name, err, c.want)
		}
	}
}

// TestImageNotAnImage: bytes with no image signature are a 400 media_undecodable that says what
// was found; a recognised format with a corrupt body names the format and the decoder's error.
func TestImageNotAnImage(t *testing.T) {
	mp4, err := os.ReadFile("../../testdata/video/h264_640x360_30fps_3s.mp4")
	if err != nil {
		t.Fatal(err)
	}
	pngData := readImage(t, "picture.png")
	webpData := readImage(t, "picture_lossless.webp")
	corruptPNG := append(append([]byte(nil), pngData[:40]...), bytes.Repeat([]byte{0x5a}, 64)...)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"html", []byte("<!DOCTYPE html><html><body>Not found</body></html>"),
			"media_undecodable: not an image: no known image signature (the bytes sniff as text/html; charset=utf-8)"},
		{"garbage", []byte{0x13, 0x37, 0x00, 0xfe, 0x01},
			"media_undecodable: not an image: no known image signature (the bytes sniff as application/octet-stream)"},
		{"empty", nil, "media_undecodable: not an image: no known image signature (the body is empty)"},
		{"mp4 video", mp4, "media_undecodable: not an image: no known image signature (the bytes sniff as video/mp4)"},
		{"png, corrupt body", corruptPNG, "media_undecodable: the PNG image cannot hold the pixels its header announces: its 0 bytes of image data cannot inflate to the 9090 bytes of its 67x45 pixels"},
		{"png, truncated", pngData[:len(pngData)/2], "media_undecodable: decoding the PNG image: png: invalid format: not enough pixel data"},
		{"webp, truncated", webpData[:len(webpData)/2], "media_undecodable: decoding the WebP image: unexpected EOF"},
	} {
		// the client's JSON error carries the code and the message (not the wrapped cause)
		_, err := picture.Decode(c.data)
		var re *reason.Error
		if !errors.As(err, &re) || re.Code != reason.MediaUndecodable || !strings.HasPrefix(string(re.Code)+": "+re.Message, c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestImageHeaderTooLarge: a header announcing more pixels than allowed is refused with
// frame_too_large from the header alone, for every decoded format: the bytes allocated by the
// call (runtime TotalAlloc, after runtime.GC) stay under 64 KiB, a small part of the smallest
// such image's RGBA buffer (16385×10×4 = 655 kB).
func TestImageHeaderTooLarge(t *testing.T) {
	webpVP8X := func(w, h uint32) []byte { // RIFF, WEBP, a VP8X chunk with the canvas size
		b := []byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00")
		b = append(b, byte(w-1), byte((w-1)>>8), byte((w-1)>>16), byte(h-1), byte((h-1)>>8), byte((h-1)>>16))
		binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-8))
		return b
	}
	// VP8L header: signature 0x2f, then 14 bits width-1, 14 bits height-1, alpha, version 0.
	webpVP8L := []byte("RIFF\x15\x00\x00\x00WEBPVP8L\x05\x00\x00\x00\x2f\xff\xff\xff\x0f\x00")
	bigBMP := imagetest.BMPWithSize(t, 100000, 30000)
	bigTIFF := tiffWithSize(t, 20000, 20000)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"webp vp8x 16385x10", webpVP8X(16385, 10), "the WebP image is 16385x10 pixels"},
		{"webp vp8x 9000x9000", webpVP8X(9000, 9000), "the WebP image is 9000x9000 pixels"},
		{"webp vp8l 16384x16384", webpVP8L, "the WebP image is 16384x16384 pixels"},
		{"bmp 100000x30000", bigBMP, "the BMP image is 100000x30000 pixels"},
		{"tiff 20000x20000", bigTIFF, "the TIFF image is 20000x20000 pixels"},
		{"gif", []byte("GIF89a broken"), "the GIF image is 25120x28530 pixels"},
	} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := picture.Decode(c.data)
		runtime.ReadMemStats(&after)
		if reason.CodeOf(err) != reason.FrameTooLarge || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want frame_too_large %q", c.name, err, c.want)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("%s: %d bytes allocated refusing the header", c.name, n)
		}
	}
}

// tiffWithSize is a real TIFF (x/image/tiff's encoder) with ImageWidth and ImageLength rewritten
// in its first IFD.
func tiffWithSize(t *testing.T, w, h uint32) []byte {
	var buf bytes.Buffer
	if err := tiff.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 4, 4)), nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	bo := binary.ByteOrder(binary.LittleEndian)
	if string(b[:2]) == "MM" {
		bo = binary.BigEndian
	}
	ifd := int(bo.Uint32(b[4:]))
	n := int(bo.Uint16(b[ifd:]))
	found := 0
	for i := 0; i < n; i++ {
		e := b[ifd+2+12*i:]
		tag, typ := bo.Uint16(e), bo.Uint16(e[2:])
		if tag != 256 && tag != 257 {
			continue
		}
		v := w
		if tag == 257 {
			v = h
		}
		if typ == 3 { // SHORT
			bo.PutUint16(e[8:], uint16(v))
		} else {
			bo.PutUint32(e[8:], v)
		}
		found++
	}
	if found != 2 {
		t.Fatalf("tiff: %d size tags", found)
	}
	return b
}

// TestImageAlpha: a picture with alpha hashes as its straight RGBA (H×W×4): the PNG and the
// lossless WebP equal FFmpeg's rgba decode of the PNG (picture_alpha.rgba), the lossy WebP with
// an ALPH chunk equals Pillow's RGBA decode (webp_pillow/picture_alpha_lossy.rgba), no longer
// FFmpeg's yuva420p decode converted by Go's YCbCr→RGB (its identity before libwebp).
func TestImageAlpha(t *testing.T) {
	const w, h = 67, 45
	raw := readImage(t, "picture_alpha.rgba")
	if len(raw) != w*h*4 {
		t.Fatalf("picture_alpha.rgba has %d bytes", len(raw))
	}
	want := canonicalHashC(w, h, 4, raw)
	for _, name := range []string{"picture_alpha.png", "picture_alpha.webp"} {
		got, err := picture.Decode(readImage(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Width != w || got.Height != h || got.Identity != want {
			t.Errorf("%s: %dx%d identity %s, want %dx%d identity %s", name, got.Width, got.Height, got.Identity.Hex(), w, h, want.Hex())
		}
	}
	yuva := readImage(t, "picture_alpha_lossy.yuva")
	const cw, ch = (w + 1) / 2, (h + 1) / 2
	if len(yuva) != 2*w*h+2*cw*ch {
		t.Fatalf("picture_alpha_lossy.yuva has %d bytes", len(yuva))
	}
	yp, cb, cr, ap := yuva[:w*h], yuva[w*h:w*h+cw*ch], yuva[w*h+cw*ch:w*h+2*cw*ch], yuva[w*h+2*cw*ch:]
	var rgba []byte
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := (y/2)*cw + x/2
			r, g, b := color.YCbCrToRGB(yp[y*w+x], cb[c], cr[c])
			rgba = append(rgba, r, g, b, ap[y*w+x])
		}
	}
	got, err := picture.Decode(readImage(t, "picture_alpha_lossy.webp"))
	if err != nil {
		t.Fatal(err)
	}
	pillow := readImage(t, "webp_pillow/picture_alpha_lossy.rgba")
	if len(pillow) != w*h*4 {
		t.Fatalf("picture_alpha_lossy.rgba has %d bytes", len(pillow))
	}
	if canonicalHashC(w, h, 4, rgba) == canonicalHashC(w, h, 4, pillow) {
		t.Fatal("Pillow's pixels hash as Go's conversion: the fixture cannot tell the decoders apart")
	}
	if want := canonicalHashC(w, h, 4, pillow); got.Width != w || got.Height != h || got.Identity != want {
		t.Errorf("lossy WebP with alpha: %dx%d identity %s, want %dx%d identity %s", got.Width, got.Height, got.Identity.Hex(), w, h, want.Hex())
	}
}

// TestImageAlphaDistinct: images the worker tells apart have distinct identities. Premultiplied
// RGB (the identity before alpha was hashed) gave one identity to an opaque black image, a fully
// transparent one and a transparent one hiding white, though vLLM composites the last two on
// white and PIL's convert("RGB") shows the hidden white.
func TestImageAlphaDistinct(t *testing.T) {
	const w, h = 6, 5
	encode := func(c color.NRGBA) []byte {
		m := image.NewNRGBA(image.Rect(0, 0, w, h))
		for i := 0; i < len(m.Pix); i += 4 {
			m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3] = c.R, c.G, c.B, c.A
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	fill := func(n int, px ...byte) []byte { return bytes.Repeat(px, n) }
	for _, c := range []struct {
		name  string
		color color.NRGBA
		want  kv.Identity
	}{
		{"opaque black", color.NRGBA{0, 0, 0, 255}, canonicalHash(w, h, fill(w*h, 0, 0, 0))},
		{"transparent black", color.NRGBA{0, 0, 0, 0}, canonicalHashC(w, h, 4, fill(w*h, 0, 0, 0, 0))},
		{"transparent white", color.NRGBA{255, 255, 255, 0}, canonicalHashC(w, h, 4, fill(w*h, 255, 255, 255, 0))},
		{"half-transparent red", color.NRGBA{255, 0, 0, 128}, canonicalHashC(w, h, 4, fill(w*h, 255, 0, 0, 128))},
	} {
		got, err := picture.Decode(encode(c.color))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Identity != c.want {
			t.Errorf("%s: identity %s, want %s", c.name, got.Identity.Hex(), c.want.Hex())
		}
	}
}
