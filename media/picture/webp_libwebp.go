package picture

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

// Still WebP pixels come from libwebp (Debian 12's libwebp-dev 1.2.4, its static libwebp.a, the
// libwebp under Debian 12's Pillow 9.4, which vLLM loads images with).
//
// Lossless (VP8L, with or without alpha): the format is exact, and libwebp's ARGB is byte for
// byte x/image/webp's on the fixtures of pngwebp_c_test.go, so those identities did not change;
// about 1.5–1.65× faster on a 4K lossless photo (docs/benchmarks.md).
//
// Lossy (VP8, with or without an ALPH chunk): libwebp's YUV → RGB (its fixed-point conversion with
// fancy chroma upsampling) is what Pillow's Image.open gives the worker, byte for byte on every
// fixture of testdata/image/webp_pillow (TestWebPLossyPillowGolden, hashes made by Pillow); Go's
// color.YCbCrToRGB over nearest-neighbour chroma differs in over 90 % of the bytes, so a lossy
// WebP's identity hashed pixels the worker never saw (and the same pixels as a PNG got another
// identity). Lossy WebP identities changed once with this switch; libwebp is also 2.6–2.8× faster.
//
// A file libwebp refuses, whose RIFF layout is not exact (webpChunksExact), or with an ALPH chunk
// the VP8X flags do not announce (webpAlphaUnflagged) goes to Go's decoder, whose verdict stands. One verdict differs: a VP8L stream that ends a little early is
// decoded by libwebp (and so by the worker's Pillow) where Go's decoder says unexpected EOF (a 400
// before); TestWebPLibwebpDifferential allows that difference and no other.

// errWebPLossy reports a lossy WebP, which decodeWebPLossless (the differential tests') leaves.
var errWebPLossy = errors.New("lossy WebP")

// decodeWebP decodes a still WebP (lossless or lossy) of w×h pixels (its header's size, checked by
// the caller) into its identity's pixel array as Pillow decodes it, allocating 4·w·h bytes.
// Errors: libwebp's refusal or an inexact RIFF layout (the caller lets Go's decoder decide then).
func decodeWebP(data []byte, w, h int) (pixelArray, error) {
	if !webpChunksExact(data) {
		return pixelArray{}, errors.New("a RIFF layout Go's decoder checks itself")
	}
	if webpAlphaUnflagged(data) {
		return pixelArray{}, errors.New("an ALPH chunk the VP8X flags do not announce")
	}
	return decodeWebPC(data, w, h, false)
}

// webpAlphaUnflagged reports whether data (chunks exact) has an ALPH chunk while its VP8X chunk's
// alpha flag (0x10) is clear. libwebp's WebPDecode applies such an alpha plane; Pillow 9.4 (its
// WebPAnimDecoder) gives the picture opaque, and Go's decoder refuses the file (400, as before
// libwebp decoded lossy files). Go's verdict stands rather than pixels the worker does not see.
func webpAlphaUnflagged(data []byte) bool {
	flagged, alph := false, false
	for p := 12; p+8 <= len(data); {
		n := int(binary.LittleEndian.Uint32(data[p+4:]))
		switch string(data[p : p+4]) {
		case "VP8X":
			flagged = n >= 1 && p+8 < len(data) && data[p+8]&0x10 != 0
		case "ALPH":
			alph = true
		}
		p += 8 + n + n&1
	}
	return alph && !flagged
}

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

// decodeWebPC is decodeWebP, or with losslessOnly decodeWebPLossless, without the RIFF check.
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
