package picture

import (
	"image"
	"image/color"
	"image/draw"
)

// pixelArray is the picture as its identity hashes it: an H×W×channels u8 array, rows packed
// (Stride = W·channels for rgb, the NRGBA stride for rgba).
type pixelArray struct {
	w, h, channels int
	row            func(y int) []byte // row y, W·channels bytes (valid until the next call)
}

// canvasPixels draws img on a canvas of the header's size and returns the array its identity
// hashes. An image whose every canvas pixel is opaque is its RGB bytes (H×W×3), the same array
// whatever the format, so equal pixels give one identity. Any other image is its straight
// (non-premultiplied) RGBA bytes (H×W×4): the worker sees a non-opaque image composited on white
// (vLLM's rgba_to_rgb, transformers' convert_to_rgb) or with alpha dropped (PIL convert("RGB")),
// both functions of the straight RGBA, so two images the worker tells apart never share an
// identity. RGB alone would merge them: premultiplied RGB makes an opaque black pixel equal to
// a transparent one of any colour, straight RGB ignores alpha.
//
// The conversions are image/draw's and image/color's integer arithmetic, deterministic for every
// decoder output (imageformat.go lists them): YCbCr by color.YCbCrToRGB, 16-bit samples by their
// high byte, premultiplied sources (RGBA, RGBA64: TIFF associated alpha) un-premultiplied by
// color.NRGBAModel. A GIF frame smaller than its logical screen leaves the rest transparent.
func canvasPixels(img image.Image, canvas image.Rectangle) pixelArray {
	w, h := canvas.Dx(), canvas.Dy()
	rgba, ok := img.(*image.RGBA)
	if !ok || rgba.Rect != canvas {
		rgba = image.NewRGBA(canvas)
		r := img.Bounds().Intersect(canvas)
		draw.Draw(rgba, r, img, r.Min, draw.Src)
	}
	if opaque(rgba) {
		buf := make([]byte, w*3)
		return pixelArray{w: w, h: h, channels: 3, row: func(y int) []byte {
			src := rgba.Pix[y*rgba.Stride : y*rgba.Stride+w*4]
			for x := 0; x < w; x++ {
				copy(buf[x*3:x*3+3], src[x*4:x*4+3])
			}
			return buf
		}}
	}
	rgba = nil // the premultiplied canvas is garbage before the straight one is allocated
	n := straightRGBA(img, canvas)
	return pixelArray{w: w, h: h, channels: 4, row: func(y int) []byte { return n.Pix[y*n.Stride : y*n.Stride+w*4] }}
}

func opaque(m *image.RGBA) bool {
	for y := 0; y < m.Rect.Dy(); y++ {
		row := m.Pix[y*m.Stride : y*m.Stride+m.Rect.Dx()*4]
		for i := 3; i < len(row); i += 4 {
			if row[i] != 0xff {
				return false
			}
		}
	}
	return true
}

// straightRGBA returns img on the canvas as straight RGBA, outside its bounds transparent black.
// Straight sources (NRGBA, NRGBA64, NYCbCrA, palettes of NRGBA colours) keep their colour under
// any alpha, including 0.
func straightRGBA(img image.Image, canvas image.Rectangle) *image.NRGBA {
	if n, ok := img.(*image.NRGBA); ok && n.Rect == canvas {
		return n
	}
	out := image.NewNRGBA(canvas)
	r := img.Bounds().Intersect(canvas)
	var palette []color.NRGBA
	if p, ok := img.(*image.Paletted); ok {
		palette = make([]color.NRGBA, len(p.Palette))
		for i, c := range p.Palette {
			palette[i] = color.NRGBAModel.Convert(c).(color.NRGBA) // a color.NRGBA is returned as is
		}
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			var c color.NRGBA
			switch m := img.(type) {
			case *image.NRGBA:
				c = m.NRGBAAt(x, y)
			case *image.NRGBA64:
				c64 := m.NRGBA64At(x, y)
				c = color.NRGBA{uint8(c64.R >> 8), uint8(c64.G >> 8), uint8(c64.B >> 8), uint8(c64.A >> 8)}
			case *image.NYCbCrA:
				yc := m.YCbCrAt(x, y)
				c.R, c.G, c.B = color.YCbCrToRGB(yc.Y, yc.Cb, yc.Cr)
				c.A = m.A[m.AOffset(x, y)]
			case *image.Paletted:
				if i := int(m.ColorIndexAt(x, y)); i < len(palette) {
					c = palette[i]
				}
			default:
				c = color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			}
			i := out.PixOffset(x, y)
			out.Pix[i], out.Pix[i+1], out.Pix[i+2], out.Pix[i+3] = c.R, c.G, c.B, c.A
		}
	}
	return out
}
