package picture

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
	"golang.org/x/image/webp"
)

// goPixels is the identity's pixel array by Go's decoders (f.decode, canvasPixels), flattened.
func goPixels(tb testing.TB, f *imageFormat, data []byte) (ch int, flat []byte) {
	tb.Helper()
	cfg, err := f.decodeConfig(bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	img, err := f.decode(bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	return flatten(canvasPixels(img, image.Rect(0, 0, cfg.Width, cfg.Height)))
}

func flatten(px pixelArray) (int, []byte) {
	var out []byte
	for y := 0; y < px.h; y++ {
		out = append(out, px.row(y)...)
	}
	return px.channels, out
}

// rawPNG writes a PNG of colour type ct and bit depth depth from rows of packed samples
// (filter 0), Adam7-interlaced when interlaced: Go's encoder writes neither interlaced PNGs nor
// gray below 8 bits. plte/trns are written when not nil.
func rawPNG(tb testing.TB, w, h int, ct, depth byte, interlaced bool, sample func(x, y int) []uint16, plte, trns []byte) []byte {
	tb.Helper()
	chans := map[byte]int{0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ct]
	bpp := chans * int(depth) // bits per pixel
	var raw bytes.Buffer
	pass := func(x0, y0, dx, dy int) {
		pw, ph := (w-x0+dx-1)/dx, (h-y0+dy-1)/dy
		if pw <= 0 || ph <= 0 {
			return
		}
		for y := y0; y < h; y += dy {
			raw.WriteByte(0)
			row := make([]byte, (pw*bpp+7)/8)
			bit := 0
			for x := x0; x < w; x += dx {
				for _, v := range sample(x, y) {
					switch depth {
					case 16:
						row[bit/8], row[bit/8+1] = byte(v>>8), byte(v)
					case 8:
						row[bit/8] = byte(v)
					default:
						row[bit/8] |= byte(v) << (8 - int(depth) - bit%8)
					}
					bit += int(depth)
				}
			}
			raw.Write(row)
		}
	}
	if interlaced {
		for _, p := range [][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
			pass(p[0], p[1], p[2], p[3])
		}
	} else {
		pass(0, 0, 1, 1)
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	_, _ = zw.Write(raw.Bytes())
	_ = zw.Close()
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, b []byte) {
		_ = binary.Write(&out, binary.BigEndian, uint32(len(b)))
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(b)
		out.WriteString(typ)
		out.Write(b)
		_ = binary.Write(&out, binary.BigEndian, c.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = depth, ct
	if interlaced {
		ihdr[12] = 1
	}
	chunk("IHDR", ihdr)
	if plte != nil {
		chunk("PLTE", plte)
	}
	if trns != nil {
		chunk("tRNS", trns)
	}
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// pngFixtures are PNGs of every colour type and the depths libpng decodes here, by Go's
// encoder and by rawPNG (interlaced, low-depth gray, tRNS, an out-of-palette index).
func pngFixtures(tb testing.TB) map[string][]byte {
	const w, h = 67, 45
	r := rand.New(rand.NewPCG(2, 8))
	enc := func(img image.Image) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			tb.Fatal(err)
		}
		return b.Bytes()
	}
	rgba, nrgba, gray := image.NewRGBA(image.Rect(0, 0, w, h)), image.NewNRGBA(image.Rect(0, 0, w, h)), image.NewGray(image.Rect(0, 0, w, h))
	pal := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.NRGBA{255, 0, 0, 255}, color.NRGBA{0, 90, 0, 128}, color.NRGBA{1, 2, 3, 0}, color.NRGBA{40, 50, 60, 255}})
	pal256 := image.NewPaletted(image.Rect(0, 0, w, h), nil)
	for i := range 256 {
		pal256.Palette = append(pal256.Palette, color.RGBA{uint8(i), uint8(255 - i), uint8(i * 7), 255})
	}
	for i := range rgba.Pix {
		rgba.Pix[i] = uint8(r.IntN(256))
		nrgba.Pix[i] = uint8(r.IntN(256))
	}
	for i := 3; i < len(rgba.Pix); i += 4 {
		rgba.Pix[i] = 255
	}
	for i := range gray.Pix {
		gray.Pix[i] = uint8(r.IntN(256))
		pal.Pix[i] = uint8(r.IntN(4))
		pal256.Pix[i] = uint8(r.IntN(256))
	}
	samples := func(n int, max uint16) func(x, y int) []uint16 {
		return func(x, y int) []uint16 {
			s := make([]uint16, n)
			for i := range s {
				s[i] = uint16((x*7 + y*13 + i*31 + x*y) % (int(max) + 1))
			}
			return s
		}
	}
	fx := map[string][]byte{
		"rgb8":         enc(rgba),
		"rgba8":        enc(nrgba),
		"gray8":        enc(gray),
		"pal2_trns":    enc(pal), // Go writes a 2-bit palette with tRNS
		"pal8":         enc(pal256),
		"gray1":        rawPNG(tb, w, h, 0, 1, false, samples(1, 1), nil, nil),
		"gray2_il":     rawPNG(tb, w, h, 0, 2, true, samples(1, 3), nil, nil),
		"gray4":        rawPNG(tb, w, h, 0, 4, false, samples(1, 15), nil, nil),
		"gray8_trns":   rawPNG(tb, w, h, 0, 8, false, samples(1, 255), nil, []byte{0, 40}),
		"rgb8_trns_il": rawPNG(tb, w, h, 2, 8, true, samples(3, 255), nil, []byte{0, 7, 0, 38, 0, 69}),
		"rgb8_il":      rawPNG(tb, w, h, 2, 8, true, samples(3, 255), nil, nil),
		"graya8_il":    rawPNG(tb, w, h, 4, 8, true, samples(2, 255), nil, nil),
		"rgba8_il":     rawPNG(tb, w, h, 6, 8, true, samples(4, 255), nil, nil),
		"pal4_oob":     rawPNG(tb, w, h, 3, 4, false, samples(1, 15), []byte{9, 9, 9, 200, 100, 0}, []byte{128}), // indices 2..15 beyond the palette
		"picture":      readFixture(tb, "picture.png"),
		"alpha":        readFixture(tb, "picture_alpha.png"),
	}
	return fx
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(imageDir + name)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

const imageDir = "../../testdata/image/"

// TestPNGLibpngEqualsGo: libpng's pixels are Go's image/png pixels (the identity's array, its
// channel count and bytes), on every colour type at 1, 2, 4 and 8 bits, palettes with tRNS and
// an index beyond the palette, interlaced files; a 16-bit PNG is left to Go (errPNGDeep).
func TestPNGLibpngEqualsGo(t *testing.T) {
	for name, data := range pngFixtures(t) {
		cfg, err := formatPNG.decodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		px, err := decodePNG(data, cfg.Width, cfg.Height)
		if err != nil {
			t.Fatalf("%s: libpng: %v", name, err)
		}
		gch, want := goPixels(t, formatPNG, data)
		ch, got := flatten(px)
		if ch != gch || !bytes.Equal(got, want) {
			t.Errorf("%s: libpng %d channels, Go %d; bytes equal %v", name, ch, gch, bytes.Equal(got, want))
		}
	}
	deep := image.NewNRGBA64(image.Rect(0, 0, 4, 4))
	var b bytes.Buffer
	_ = png.Encode(&b, deep)
	if _, err := decodePNG(b.Bytes(), 4, 4); err != errPNGDeep {
		t.Fatalf("16-bit PNG: %v, want errPNGDeep", err)
	}
}

// webpFixtures are WebPs encoded by the ffmpeg CLI's libwebp from Go-drawn pictures: lossy and
// lossless, opaque and with alpha, plus the committed fixtures.
func webpFixtures(tb testing.TB, w, h int) map[string][]byte {
	tb.Helper()
	photo, alpha := photoRGBA(w, h, false), photoRGBA(w, h, true)
	return map[string][]byte{
		"lossy":          ffmpegWebP(tb, photo, w, h, "-lossless", "0", "-quality", "85"),
		"lossless":       ffmpegWebP(tb, photo, w, h, "-lossless", "1"),
		"lossy_alpha":    ffmpegWebP(tb, alpha, w, h, "-lossless", "0", "-quality", "85"),
		"lossless_alpha": ffmpegWebP(tb, alpha, w, h, "-lossless", "1"),
	}
}

// photoRGBA is a deterministic w×h photo-like RGBA picture (smooth gradients, noise, edges);
// with alpha, a soft transparent vignette.
func photoRGBA(w, h int, alpha bool) []byte {
	r := rand.New(rand.NewPCG(7, 3))
	px := make([]byte, 4*w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := 4 * (y*w + x)
			px[i] = uint8(x*200/w + r.IntN(40))
			px[i+1] = uint8(y*180/h + r.IntN(40))
			px[i+2] = uint8((x+y)*100/(w+h) + 60 + r.IntN(30))
			if (x/97+y/61)%5 == 0 {
				px[i] ^= 0x80
			}
			px[i+3] = 255
			if alpha {
				px[i+3] = uint8(min(255, (x*255/w+y*255/h)/2+r.IntN(8)))
			}
		}
	}
	return px
}

// ffmpegWebP encodes raw RGBA with the ffmpeg CLI's libwebp encoder.
func ffmpegWebP(tb testing.TB, rgba []byte, w, h int, args ...string) []byte {
	tb.Helper()
	dir := tb.TempDir()
	in, out := filepath.Join(dir, "in.rgba"), filepath.Join(dir, "out.webp")
	if err := os.WriteFile(in, rgba, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("ffmpeg", append([]string{"-v", "error", "-f", "rawvideo", "-pix_fmt", "rgba", "-s", strconv.Itoa(w) + "x" + strconv.Itoa(h),
		"-i", in, "-frames:v", "1", "-c:v", "libwebp"}, append(args, "-y", out)...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("ffmpeg: %v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestWebPLibwebpVersusGo: libwebp's pixels of a lossless WebP (opaque, alpha) are x/image/webp's
// byte for byte, so lossless identities did not change with libwebp; of a lossy one (opaque,
// alpha) most bytes differ (the YCbCr → RGB conversion and chroma upsampling): libwebp's are
// Pillow's (TestWebPLossyPillowGolden), so the fallback to Go's decoder gives other pixels, and
// decodeWebPLossless leaves lossy files alone (errWebPLossy).
func TestWebPLibwebpVersusGo(t *testing.T) {
	fx := webpFixtures(t, 67, 45)
	fx["picture_lossless"] = readFixture(t, "picture_lossless.webp")
	fx["picture_lossy"] = readFixture(t, "picture_lossy.webp")
	fx["picture_alpha"] = readFixture(t, "picture_alpha.webp")
	fx["picture_alpha_lossy"] = readFixture(t, "picture_alpha_lossy.webp")
	for name, data := range fx {
		cfg, err := webp.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		gch, want := goPixels(t, formatWebP, data)
		px, err := decodeWebPC(data, cfg.Width, cfg.Height, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ch, got := flatten(px)
		diff := 0
		if len(got) == len(want) {
			for i := range got {
				if got[i] != want[i] {
					diff++
				}
			}
		}
		t.Logf("%s: libwebp %d channels, Go %d; %d of %d bytes differ", name, ch, gch, diff, len(want))
		lossless := strings.Contains(name, "lossless") || name == "picture_alpha" // picture_alpha.webp is VP8L
		_, lerr := decodeWebPLossless(data, cfg.Width, cfg.Height)
		switch {
		case lossless && (ch != gch || diff != 0 || lerr != nil):
			t.Errorf("%s (lossless): libwebp differs from Go's decoder (%d of %d bytes, %d/%d channels), or %v", name, diff, len(want), ch, gch, lerr)
		case !lossless && (diff*2 < len(want) || lerr != errWebPLossy):
			// the lossy conversion differs: lossy identities changed once when lossy WebP went
			// to libwebp (Pillow's pixels, TestWebPLossyPillowGolden)
			t.Errorf("%s (lossy): %d of %d bytes differ from Go's, decodeWebPLossless %v", name, diff, len(want), lerr)
		}
	}
}

// screenshot4K is a deterministic 3840×2160 PNG like a desktop screenshot (flat panels, window
// borders, text-like glyph rows, a gradient wallpaper and a photo thumbnail), by Go's encoder.
func screenshot4K(tb testing.TB) []byte {
	const w, h = 3840, 2160
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(3, 9))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := img.PixOffset(x, y)
			c := [3]uint8{uint8(30 + y*60/h), uint8(40 + x*50/w), 90}
			switch {
			case x > 200 && x < 2000 && y > 150 && y < 1800: // a window: white with text rows
				c = [3]uint8{250, 250, 250}
				if (y-150)%28 < 16 && (x/9+y/28)%7 != 0 && (x*31+y*17)%5 < 3 {
					c = [3]uint8{20, 20, 30}
				}
			case x > 2100 && x < 3700 && y > 300 && y < 1300: // a photo thumbnail
				c = [3]uint8{uint8(x/7 + r.IntN(24)), uint8(y/5 + r.IntN(24)), uint8(r.IntN(64) + 100)}
			case y < 40: // a panel
				c = [3]uint8{45, 45, 48}
			}
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c[0], c[1], c[2], 255
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkImage4KPNGWebP compares, in one run, Go's decoders (image/png, x/image/webp, with
// canvasPixels and the hash: the identity as DecodeImage takes it) against libpng and libwebp
// on a 4K PNG screenshot and a 4K photo WebP (lossy and lossless): docs/benchmarks.md.
func BenchmarkImage4KPNGWebP(b *testing.B) {
	hash := func(px pixelArray) {
		h := xxh3.New()
		for y := 0; y < px.h; y++ {
			_, _ = h.Write(px.row(y))
		}
	}
	goDecode := func(f *imageFormat, data []byte) func(b *testing.B) {
		return func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				img, err := f.decode(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				hash(canvasPixels(img, img.Bounds()))
			}
		}
	}
	shot := screenshot4K(b)
	b.Run("png_screenshot/go", goDecode(formatPNG, shot))
	b.Run("png_screenshot/libpng", func(b *testing.B) {
		b.SetBytes(int64(len(shot)))
		for b.Loop() {
			px, err := decodePNG(shot, 3840, 2160)
			if err != nil {
				b.Fatal(err)
			}
			hash(px)
		}
	})
	b.Run("png_screenshot/DecodeImage", func(b *testing.B) { // the path a request takes (libpng)
		b.SetBytes(int64(len(shot)))
		for b.Loop() {
			if _, err := Decode(shot); err != nil {
				b.Fatal(err)
			}
		}
	})
	fx := webpFixtures(b, 3840, 2160)
	for _, name := range []string{"lossy", "lossless", "lossy_alpha"} {
		data := fx[name]
		b.Run("webp_"+name+"/go", goDecode(formatWebP, data))
		b.Run("webp_"+name+"/libwebp", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				px, err := decodeWebP(data, 3840, 2160) // the production path
				if err != nil {
					b.Fatal(err)
				}
				hash(px)
			}
		})
	}
}
