package resolver

/*
#cgo LDFLAGS: -l:libwebp.a -lm -lpthread
#include <stdlib.h>
#include "webp_libwebp.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"unsafe"
)

// Lossless WebP pixels (VP8L, with or without alpha) come from libwebp (Debian 12's libwebp-dev
// 1.2.4, its static libwebp.a): the format is exact, and libwebp's ARGB is byte for byte
// x/image/webp's on the fixtures of pngwebp_c_test.go, so identities do not change; it is about
// 1.5–1.65× faster on a 4K lossless photo (docs/benchmarks.md). Lossy WebP (VP8) stays with
// x/image/webp: its YCbCr → RGB is Go's color.YCbCrToRGB over nearest-neighbour chroma, libwebp's
// (Pillow's) is its own fixed-point conversion with fancy upsampling, and over 90 % of the RGB
// bytes differ, so switching would change every lossy WebP identity (as the JPEG switch did) —
// left for a decision, docs/benchmarks.md. A file libwebp refuses, or whose RIFF layout is not
// exact (webpChunksExact), goes to Go's decoder, whose verdict stands. One verdict differs: a
// VP8L stream that ends a little early is decoded by libwebp (and so by the worker's Pillow)
// where Go's decoder says unexpected EOF (a 400 before); TestWebPLibwebpDifferential allows that
// difference and no other.

// errWebPLossy reports a lossy WebP, which decodeWebPLossless leaves to Go's decoder.
var errWebPLossy = errors.New("lossy WebP")

// decodeWebPLossless decodes a lossless WebP of w×h pixels (its header's size, checked by the
// caller) into its identity's pixel array, allocating 4·w·h bytes. Errors: errWebPLossy, or
// libwebp's refusal (the caller lets Go's decoder decide then).
func decodeWebPLossless(data []byte, w, h int) (pixelArray, error) {
	if !webpChunksExact(data) {
		return pixelArray{}, errors.New("a RIFF layout Go's decoder checks itself")
	}
	return decodeWebPC(data, w, h, true)
}

// webpChunksExact reports whether data's RIFF size is the file's and its chunks tile the file
// exactly (each header and body, padded to even, within the RIFF). libwebp decodes a file whose
// RIFF size claims more bytes than it has, which Go's decoder refuses ("unexpected EOF"); such a
// file goes to Go (TestWebPLibwebpDifferential).
func webpChunksExact(data []byte) bool {
	if len(data) < 20 || uint64(binary.LittleEndian.Uint32(data[4:]))+8 != uint64(len(data)) {
		return false
	}
	for p := 12; p < len(data); {
		if p+8 > len(data) {
			return false
		}
		n := uint64(binary.LittleEndian.Uint32(data[p+4:]))
		n += n & 1
		if uint64(p)+8+n > uint64(len(data)) {
			return false
		}
		p += 8 + int(n)
	}
	return true
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
