package picture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"io"
	"math/rand/v2"
	"sort"
	"testing"
)

// pngChunk is one chunk of a PNG (its CRC recomputed when written).
type pngChunk struct {
	typ  string
	data []byte
}

func splitPNG(d []byte) []pngChunk {
	var cs []pngChunk
	for p := 8; p+12 <= len(d); {
		n := int(binary.BigEndian.Uint32(d[p:]))
		if p+12+n > len(d) {
			break
		}
		cs = append(cs, pngChunk{string(d[p+4 : p+8]), append([]byte(nil), d[p+8:p+8+n]...)})
		p += 12 + n
	}
	return cs
}

func joinPNG(cs []pngChunk) []byte {
	out := []byte("\x89PNG\r\n\x1a\n")
	for _, c := range cs {
		out = binary.BigEndian.AppendUint32(out, uint32(len(c.data)))
		out = append(out, c.typ...)
		out = append(out, c.data...)
		out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(c.typ), c.data...)))
	}
	return out
}

// TestPNGLibpngDifferential: over 4000 corruptions of the PNG fixtures that keep every chunk's
// CRC valid (a byte of a chunk changed, a chunk's data cut short or extended, a chunk dropped,
// duplicated or moved, an ancillary, unknown or unknown critical chunk inserted; a fixed seed),
// wherever libpng decodes a file, Go's decoder decodes it too and to the same pixels: libpng never
// accepts a file Go refuses (Go's 400 would otherwise become a routed request), and where it
// refuses one Go decodes, Go's pixels are taken (decodeImage falls back).
func TestPNGLibpngDifferential(t *testing.T) {
	fx := pngFixtures(t)
	names := make([]string, 0, len(fx))
	for n := range fx {
		names = append(names, n)
	}
	sort.Strings(names)
	r := rand.New(rand.NewPCG(28, 1))
	extra := []pngChunk{{"gAMA", []byte{0, 0, 0xb1, 0x8f}}, {"tEXt", []byte("Title\x00kvroute")}, {"abCd", []byte{1, 2, 3}},
		{"ABCD", []byte{4}}, {"tRNS", []byte{0, 1}}, {"PLTE", []byte{1, 2, 3}}, {"IEND", nil}, {"IDAT", []byte{0x78, 0x9c, 3, 0}}}
	both, goOnly, neither := 0, 0, 0
	for i := 0; i < 4000; i++ {
		cs := splitPNG(fx[names[r.IntN(len(names))]])
		k := r.IntN(len(cs))
		switch r.IntN(6) {
		case 0:
			if len(cs[k].data) > 0 {
				cs[k].data[r.IntN(len(cs[k].data))] ^= byte(1 + r.IntN(255))
			}
		case 1:
			cs[k].data = cs[k].data[:r.IntN(len(cs[k].data)+1)]
		case 2:
			cs[k].data = append(cs[k].data, byte(r.IntN(256)))
		case 3:
			cs = append(cs[:k], cs[k+1:]...)
		case 4:
			c := cs[k]
			j := r.IntN(len(cs) + 1)
			cs = append(cs[:j], append([]pngChunk{c}, cs[j:]...)...)
		case 5:
			j := 1 + r.IntN(len(cs))
			cs = append(cs[:j], append([]pngChunk{extra[r.IntN(len(extra))]}, cs[j:]...)...)
		}
		d := joinPNG(cs)
		cfg, err := formatPNG.decodeConfig(bytes.NewReader(d))
		if err != nil || cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width*cfg.Height > 1<<22 {
			continue
		}
		px, cerr := decodePNG(d, cfg.Width, cfg.Height)
		img, gerr := formatPNG.decode(bytes.NewReader(d))
		switch {
		case cerr == nil && gerr != nil:
			t.Fatalf("corruption %d: libpng decodes a file Go refuses (%v)", i, gerr)
		case cerr == nil:
			both++
			gch, want := flatten(canvasPixels(img, image.Rect(0, 0, cfg.Width, cfg.Height)))
			ch, got := flatten(px)
			if ch != gch || !bytes.Equal(got, want) {
				t.Fatalf("corruption %d: libpng and Go decode different pixels", i)
			}
		case gerr == nil:
			goOnly++
		default:
			neither++
		}
	}
	t.Logf("both decode %d, Go only %d, neither %d", both, goOnly, neither)
	if both < 500 {
		t.Fatalf("only %d corruptions decoded by both: the comparison covers too little", both)
	}
}

// TestWebPLibwebpDifferential: over 3000 corruptions of the lossless WebP fixtures (a byte
// changed, a run cut out, the tail cut off, the RIFF size changed; a fixed seed), wherever
// decodeWebPLossless decodes a file Go's decoder decodes too, the pixels are the same, and where
// Go's refuses one libwebp decodes, Go's error is an unexpected EOF (a VP8L stream ending early,
// which libwebp, and so the worker's Pillow, decodes), never another verdict.
func TestWebPLibwebpDifferential(t *testing.T) {
	fx := webpFixtures(t, 67, 45)
	srcs := [][]byte{fx["lossless"], fx["lossless_alpha"], readFixture(t, "picture_lossless.webp"), readFixture(t, "picture_alpha.webp")}
	r := rand.New(rand.NewPCG(28, 2))
	both, goOnly, neither, libwebpOnly := 0, 0, 0, 0
	for i := 0; i < 3000; i++ {
		d := append([]byte(nil), srcs[r.IntN(len(srcs))]...)
		switch r.IntN(4) {
		case 0:
			d[12+r.IntN(len(d)-12)] ^= byte(1 + r.IntN(255))
		case 1:
			a := 12 + r.IntN(len(d)-12)
			d = append(d[:a], d[min(len(d), a+1+r.IntN(16)):]...)
		case 2:
			d = d[:12+r.IntN(len(d)-12)]
		case 3:
			binary.LittleEndian.PutUint32(d[4:], uint32(len(d)-8+r.IntN(17)-8))
		}
		if sniffImage(d) != formatWebP {
			continue
		}
		cfg, err := formatWebP.decodeConfig(bytes.NewReader(d))
		if err != nil || cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width*cfg.Height > 1<<22 {
			continue
		}
		px, cerr := decodeWebPLossless(d, cfg.Width, cfg.Height)
		img, gerr := formatWebP.decode(bytes.NewReader(d))
		switch {
		case cerr == nil && gerr != nil:
			// libwebp's bit reader reads a VP8L stream that ends a little early as if padded
			// (the worker's Pillow decodes with libwebp too); Go's says unexpected EOF. That one
			// difference is allowed: a 400 becomes the pixels the worker decodes.
			if !errors.Is(gerr, io.ErrUnexpectedEOF) {
				t.Fatalf("corruption %d: libwebp decodes a file Go refuses (%v)", i, gerr)
			}
			libwebpOnly++
		case cerr == nil:
			both++
			gch, want := flatten(canvasPixels(img, image.Rect(0, 0, cfg.Width, cfg.Height)))
			ch, got := flatten(px)
			if ch != gch || !bytes.Equal(got, want) {
				nd := 0
				for j := range min(len(got), len(want)) {
					if got[j] != want[j] {
						nd++
					}
				}
				t.Errorf("corruption %d: libwebp and Go decode different pixels (%d/%d channels, %d of %d bytes differ, %q, len %d)", i, ch, gch, nd, len(want), d[12:16], len(d))
			}
		case gerr == nil:
			goOnly++
		default:
			neither++
		}
	}
	t.Logf("both decode %d, Go only %d, neither %d, libwebp only (Go: unexpected EOF) %d", both, goOnly, neither, libwebpOnly)
	if both < 200 {
		t.Fatalf("only %d corruptions decoded by both: the comparison covers too little", both)
	}
}
