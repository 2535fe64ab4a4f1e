package picture

/*
#cgo LDFLAGS: -l:libjpeg.a
#include <stdlib.h>
#include "jpeg_turbo.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// JPEG pixels come from libjpeg-turbo (Debian 12's libjpeg62-turbo-dev 2.1.5, its static
// libjpeg.a, so the binary does not depend on a shared libjpeg), decoded as Pillow decodes a
// JPEG for the worker (Pillow's JpegDecode.c with no draft mode: 8-bit samples, JDCT_ISLOW, fancy
// upsampling, out_color_space JCS_RGB; a grayscale image's gray replicated into R, G and B, as
// Pillow's convert("RGB") does). These are the pixels the worker's processor sees, and the
// identity is taken over them. Go's image/jpeg gives other pixels: its chroma upsampling is
// nearest-neighbour (libjpeg's fancy upsampling is a triangle filter) and its IDCT and colour
// conversion round differently; on a 4:2:0 photo 91 % of the RGB bytes differ, by up to 46. It is
// also about 6x slower (docs/benchmarks.md). CMYK and YCCK JPEGs (Adobe) are still decoded by Go
// (libjpeg-turbo does not convert them to RGB; Pillow keeps them CMYK and vLLM converts with
// Pillow's formula, which kvroute does not reproduce either).

// errJPEGOtherSpace reports a JPEG that decodeJPEGRGB leaves to Go's decoder.
var errJPEGOtherSpace = errors.New("JPEG colour space is not Gray, YCbCr or RGB")

// jpegError is libjpeg's own account of data it refused.
type jpegError string

func (e jpegError) Error() string { return string(e) }

// decodeJPEGRGB decodes a JPEG of w×h pixels (its header's size, checked by the caller) into
// packed RGB rows, 3·w·h bytes. Errors: errJPEGOtherSpace (decode it with Go instead), a
// jpegError (corrupt data, or data that ends before the image: Pillow refuses a truncated file
// too, "image file is truncated").
func decodeJPEGRGB(data []byte, w, h int) ([]byte, error) {
	if len(data) == 0 {
		return nil, jpegError("empty JPEG")
	}
	out := make([]byte, 3*w*h)
	var msg [256]C.char
	// data and out are Go memory passed for the duration of the call only (cgo pointer rules:
	// neither holds Go pointers).
	rc := C.kv_jpeg_decode_rgb((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&out[0])), C.int(w), C.int(h), &msg[0], C.int(len(msg)))
	switch rc {
	case C.KV_JPEG_OK:
		return out, nil
	case C.KV_JPEG_OTHER_SPACE:
		return nil, errJPEGOtherSpace
	case C.KV_JPEG_TRUNCATED:
		return nil, jpegError("the data ends before the image does (truncated file)")
	case C.KV_JPEG_SIZE:
		return nil, jpegError("libjpeg reads another size than the header's")
	}
	return nil, jpegError(C.GoString(&msg[0]))
}

// packedRGB is the pixel array of packed RGB rows (an opaque image: C = 3).
func packedRGB(rgb []byte, w, h int) pixelArray {
	return pixelArray{w: w, h: h, channels: 3, row: func(y int) []byte { return rgb[y*w*3 : (y+1)*w*3] }}
}
