package picture

/*
#cgo LDFLAGS: -l:libpng16.a -l:libz.a -lm
#include <stdlib.h>
#include "png_libpng.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// PNG pixels of 8-bit PNGs (every colour type, palette and tRNS, interlaced or not) come from
// libpng (Debian 12's libpng-dev 1.6.39, its static libpng16.a, with zlib's static libz.a),
// transformed to the samples Go's image/png gives: palette entries expanded (an index beyond the
// palette is opaque black in both), 1/2/4-bit gray scaled to 8 bits (×255/(2^d−1)), tRNS turned
// into alpha 0 or 255, gray replicated into R, G and B, no gamma or colour-profile conversion
// (Go ignores gAMA, iCCP and sRGB, and so does Pillow's PNG plugin). The output is byte for byte
// Go's on the fixtures of png_libpng_test.go, so identities do not change. 16-bit PNGs stay with
// Go's decoder: canvasPixels keeps the high byte of opaque samples but premultiplies a partly
// transparent 16-bit pixel before the opacity test, which libpng's transformations do not give.
// Any libpng error or warning, or a chunk sequence Go's reader would refuse (pngChunksAsGo),
// hands the file to Go's decoder, whose verdict stands.

// errPNGDeep reports a 16-bit PNG, which decodePNG leaves to Go's decoder.
var errPNGDeep = errors.New("16-bit PNG")

// decodePNG decodes an 8-bit PNG of w×h pixels (its header's size, checked by the caller) into
// its identity's pixel array, allocating 4·w·h bytes (within decodedBytesPerPixel). Errors:
// errPNGDeep, or libpng's words (the caller lets Go's decoder decide then).
func decodePNG(data []byte, w, h int) (pixelArray, error) {
	if !pngChunksAsGo(data) {
		return pixelArray{}, errors.New("a chunk sequence Go's decoder checks itself")
	}
	out := make([]byte, 4*w*h)
	var msg [256]C.char
	var ch C.int
	// data and out are Go memory passed for the duration of the call only (cgo pointer rules).
	rc := C.kv_png_decode((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&out[0])), C.int(w), C.int(h), &ch, &msg[0], C.int(len(msg)))
	switch rc {
	case C.KV_PNG_OK:
		return samplesPixels(out, w, h, int(ch)), nil
	case C.KV_PNG_DEEP:
		return pixelArray{}, errPNGDeep
	case C.KV_PNG_SIZE:
		return pixelArray{}, errors.New("libpng reads another size than the header's")
	}
	return pixelArray{}, errors.New(C.GoString(&msg[0]))
}

// samplesPixels is the identity's pixel array of packed 8-bit rows of ch (3: RGB, 4: straight
// RGBA) samples per pixel: RGB when every pixel is opaque (canvasPixels' rule), else the RGBA.
func samplesPixels(buf []byte, w, h, ch int) pixelArray {
	if ch == 3 {
		return packedRGB(buf[:3*w*h], w, h)
	}
	px := buf[:4*w*h]
	for i := 3; i < len(px); i += 4 {
		if px[i] != 0xff {
			return pixelArray{w: w, h: h, channels: 4, row: func(y int) []byte { return px[y*w*4 : (y+1)*w*4] }}
		}
	}
	// opaque: packed to RGB in place (row y's RGB ends before row y+1's RGBA starts)
	for i := 0; i < w*h; i++ {
		px[3*i], px[3*i+1], px[3*i+2] = px[4*i], px[4*i+1], px[4*i+2]
	}
	return packedRGB(px[:3*w*h], w, h)
}
