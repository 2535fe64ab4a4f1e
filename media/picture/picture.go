// Package picture decodes a still image and computes its identity (DESIGN.md §6 "Images"):
// XXH3-64 (seed 0) over Dynamo's canonical_content_hash layout of the pixels the worker's Pillow
// gives (Decode), or, for media { image_identity bytes }, the low 64 bits of XXH3-128 of the encoded
// bytes with the header's size (Header). Formats are recognised by signature (imageformat.go);
// JPEG, 8-bit PNG and WebP are decoded by libjpeg-turbo, libpng and libwebp as Pillow decodes them
// (jpeg_turbo.go, png_libpng.go, webp_libwebp.go), the rest by Go's decoders; pixels.go holds the one
// alpha rule. Errors are reason codes (package reason).
//
// It is Caddy-free and router-free: routing/mediaresolver adapts it to the router's media port.
package picture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/reason"
)

// Info is a picture's identity and its size in pixels (the header's canvas).
type Info struct {
	Identity      kv.Identity
	Width, Height int
}

// Size caps: an image larger than this is rejected (frame_too_large) before its
// pixels are decoded.
const (
	MaxSide   = 16384
	MaxPixels = 64 << 20
)

// decodedBytesPerPixel bounds what decoding allocates per pixel of the header's size: the
// decoder's own image (at most 8 bytes, a 16-bit RGBA PNG or TIFF) and the canvas conversion
// (at most 4 bytes, RGBA).
const decodedBytesPerPixel = 12

// Decode decodes an image and computes its identity: XXH3-64 (seed 0) over Dynamo's
// canonical_content_hash layout of the pixels (u64le rank 3, u64le H, W, C, u8 dtype 0, the rows
// packed): C = 3, the RGB bytes, when every pixel is opaque; C = 4, the straight RGBA bytes,
// otherwise (pixels.go says why). The size is checked on the header (DecodeConfig) before any
// pixel buffer is allocated.
//
// Decoded: PNG (8-bit by libpng, png_libpng.go), JPEG (libjpeg-turbo as Pillow decodes it,
// jpeg_turbo.go), GIF, WebP (lossy, lossless by libwebp, webp_libwebp.go; with alpha), BMP, TIFF
// (imageformat.go).
// Errors, as reason codes:
//   - unsupported_codec (a fallback: forwarded unchanged, routed on the text before it): a
//     recognised image format kvroute does not decode (AVIF, HEIC, JPEG 2000, JPEG XL, ICO,
//     animated WebP, …; sniffImage) or a valid file using a feature its Go decoder lacks
//     (12-bit JPEG, RLE BMP, JPEG-compressed TIFF, …).
//   - media_undecodable (400): no known image signature ("not an image: …"), or a recognised
//     format whose body does not decode ("decoding the PNG image: …").
//   - frame_too_large (400): the header's width or height above MaxSide, or more than
//     MaxPixels pixels.
//   - identity_error (a fallback): a decoder panicked on the input (recovered, as the video
//     decoder's panics are).
func Decode(data []byte) (info *Info, err error) {
	return DecodeReserved(data, nil)
}

// DecodeReserved is Decode with the decoded bytes reserved (reserve, when not nil, is called
// with the bound on them once the header's size is known and within the limits, and released
// when the decode ends; its error, reason.MediaBusy, is returned as it is: a fallback).
func DecodeReserved(data []byte, reserve func(n int64) (release func(), err error)) (info *Info, err error) {
	f := sniffImage(data)
	defer func() {
		if p := recover(); p != nil {
			info, err = nil, reason.New(reason.IdentityError, "decoding the %s image: panic: %v", f.name, p)
		}
	}()
	cfg, err := checkHeader(f, data, "decoding the %s image")
	if err != nil {
		return nil, err
	}
	if reserve != nil {
		release, err := reserve(int64(cfg.Width) * int64(cfg.Height) * decodedBytesPerPixel)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	px, err := decodePixels(f, data, cfg.Width, cfg.Height)
	if err != nil {
		return nil, err
	}
	hs := xxh3.New()
	var hdr [8]byte
	for _, v := range []uint64{3, uint64(px.h), uint64(px.w), uint64(px.channels)} {
		binary.LittleEndian.PutUint64(hdr[:], v)
		_, _ = hs.Write(hdr[:])
	}
	_, _ = hs.Write([]byte{0})
	for y := 0; y < px.h; y++ {
		_, _ = hs.Write(px.row(y))
	}
	id := kv.Identity(hs.Sum64())
	if id == 0 {
		return nil, reason.New(reason.IdentityError, "the image hashed to 0")
	}
	return &Info{Identity: id, Width: px.w, Height: px.h}, nil
}

// undecodableErr is the client error of f's decoder refusing the data (err).
func undecodableErr(f *imageFormat, err error) error {
	return stepErr(f, err, "decoding the %s image")
}

// stepErr is the client's error for err of step (a format string naming the image's format):
// UnsupportedCodec for a variant kvroute does not decode, MediaUndecodable otherwise.
func stepErr(f *imageFormat, err error, step string) error {
	step = fmt.Sprintf(step, f.name)
	if unsupportedVariant(err) {
		return reason.Wrap(reason.UnsupportedCodec, err, "%s: a variant kvroute does not decode", step)
	}
	// the decoder's own words reach the client (400): what in the file is wrong
	return reason.New(reason.MediaUndecodable, "%s: %v", step, err)
}

// checkHeader applies, to data sniffed as f (nil: no known signature), the checks both the pixel
// decode (DecodeReserved) and the bytes identity (Header) make before anything else: a format
// kvroute decodes, a readable header (its error named by step), the size limits, and bytes that
// can hold the pixels the header announces. It returns the header.
func checkHeader(f *imageFormat, data []byte, step string) (image.Config, error) {
	if f == nil {
		return image.Config{}, reason.New(reason.MediaUndecodable, "not an image: no known image signature (%s)", describeContent(data))
	}
	if !f.decodable() {
		return image.Config{}, reason.New(reason.UnsupportedCodec, "the image is %s, which kvroute does not decode (it decodes PNG, JPEG, GIF, WebP, BMP and TIFF)", f.name)
	}
	cfg, err := f.decodeConfig(bytes.NewReader(data))
	if err != nil {
		return cfg, stepErr(f, err, step)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > MaxSide || cfg.Height > MaxSide || cfg.Width*cfg.Height > MaxPixels {
		return cfg, reason.New(reason.FrameTooLarge, "the %s image is %dx%d pixels, larger than allowed", f.name, cfg.Width, cfg.Height)
	}
	if err := checkPlausible(f, data, cfg); err != nil {
		return cfg, reason.New(reason.MediaUndecodable, "the %s image cannot hold the pixels its header announces: %v", f.name, err)
	}
	return cfg, nil
}

// decodePixels decodes data of format f, whose header says w×h, into the array its identity
// hashes (pixels.go): JPEG by libjpeg-turbo, 8-bit PNG by libpng, WebP by libwebp — the pixels
// the worker's Pillow gives (jpeg_turbo.go, png_libpng.go, webp_libwebp.go) — and anything they
// leave or refuse by Go's decoder. Errors are the client's (MediaUndecodable, UnsupportedCodec).
func decodePixels(f *imageFormat, data []byte, w, h int) (pixelArray, error) {
	var px pixelArray
	if f == formatJPEG {
		// libjpeg-turbo, as Pillow decodes it (jpeg_turbo.go); CMYK and YCCK go on to Go's decoder
		rgb, err := decodeJPEGRGB(data, w, h)
		switch {
		case err == nil:
			px = packedRGB(rgb, w, h)
		case !errors.Is(err, errJPEGOtherSpace):
			return pixelArray{}, reason.New(reason.MediaUndecodable, "decoding the JPEG image: %v", err)
		}
	}
	// 8-bit PNG by libpng (the pixels Go's decoder gives, faster), WebP by libwebp (lossless: Go's
	// pixels, faster; lossy: Pillow's pixels); anything they leave or refuse goes on to Go's decoder
	switch f {
	case formatPNG:
		px, _ = decodePNG(data, w, h)
	case formatWebP:
		px, _ = decodeWebP(data, w, h)
	}
	if px.row == nil {
		img, err := f.decode(bytes.NewReader(data))
		if err != nil {
			return pixelArray{}, undecodableErr(f, err)
		}
		// The picture is the header's canvas: the size the worker's PIL reports and the token
		// count comes from (a GIF's first frame may cover only part of its logical screen).
		px = canvasPixels(img, image.Rect(0, 0, w, h))
	}
	return px, nil
}

// Header is the bytes identity of data (media { image_identity bytes }) (sum = XXH3-128(data)) with the header's
// dimensions, under the same format, size and plausibility checks as Decode before its
// decode.
func Header(data []byte, sum xxh3.Uint128) (info *Info, err error) {
	f := sniffImage(data)
	defer func() {
		if p := recover(); p != nil {
			info, err = nil, reason.New(reason.IdentityError, "reading the %s image header: panic: %v", f.name, p)
		}
	}()
	cfg, err := checkHeader(f, data, "reading the %s image header")
	if err != nil {
		return nil, err
	}
	id := kv.Identity(sum.Lo)
	if id == 0 {
		return nil, reason.New(reason.IdentityError, "the image's bytes hashed to 0")
	}
	return &Info{Identity: id, Width: cfg.Width, Height: cfg.Height}, nil
}
