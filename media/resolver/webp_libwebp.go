package resolver

/*
#cgo LDFLAGS: -l:libwebp.a -lm -lpthread
#include <stdlib.h>
#include "webp_libwebp.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Lossless WebP pixels (VP8L, with or without alpha) come from libwebp (Debian 12's libwebp-dev
// 1.2.4, its static libwebp.a): the format is exact, and libwebp's ARGB is byte for byte
// x/image/webp's on the fixtures of pngwebp_c_test.go, so identities do not change; it is about
// 1.6× faster on a 4K lossless photo (docs/benchmarks.md). Lossy WebP (VP8) stays with
// x/image/webp: its YCbCr → RGB is Go's color.YCbCrToRGB over nearest-neighbour chroma, libwebp's
// (Pillow's) is its own fixed-point conversion with fancy upsampling, and over 90 % of the RGB
// bytes differ, so switching would change every lossy WebP identity (as the JPEG switch did) —
// left for a decision, docs/benchmarks.md. A file libwebp refuses goes to Go's decoder, whose
// verdict stands.

// errWebPLossy reports a lossy WebP, which decodeWebPLossless leaves to Go's decoder.
var errWebPLossy = errors.New("lossy WebP")

// decodeWebPLossless decodes a lossless WebP of w×h pixels (its header's size, checked by the
// caller) into its identity's pixel array, allocating 4·w·h bytes. Errors: errWebPLossy, or
// libwebp's refusal (the caller lets Go's decoder decide then).
func decodeWebPLossless(data []byte, w, h int) (pixelArray, error) {
	return decodeWebPC(data, w, h, true)
}

// decodeWebPC is decodeWebPLossless, or with losslessOnly false any still WebP by libwebp's
// defaults (the benchmark and the comparison with Go's lossy decode).
func decodeWebPC(data []byte, w, h int, losslessOnly bool) (pixelArray, error) {
	if len(data) == 0 {
		return pixelArray{}, errors.New("empty WebP")
	}
	out := make([]byte, 4*w*h)
	var ch C.int
	only := C.int(0)
	if losslessOnly {
		only = 1
	}
	// data and out are Go memory passed for the duration of the call only (cgo pointer rules).
	switch C.kv_webp_decode((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&out[0])), C.int(w), C.int(h), &ch, only) {
	case C.KV_WEBP_OK:
		return samplesPixels(out, w, h, int(ch)), nil
	case C.KV_WEBP_LOSSY:
		return pixelArray{}, errWebPLossy
	case C.KV_WEBP_SIZE:
		return pixelArray{}, errors.New("libwebp reads another size than the header's")
	}
	return pixelArray{}, errors.New("libwebp refused the data")
}
