// Package resolver implements mediaport.Media over the media fetcher and decoder: it fetches a
// media URL, decodes it at the edge and returns what the router needs (identity, frame count,
// geometry). kvroute's handler and kvroute-sim both use it, so the router and the simulated
// worker sample and hash a clip the same way.
package mediaresolver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// Image size caps: an image_url part larger than this is rejected (frame_too_large) before its
// pixels are decoded.
const (
	MaxImageSide   = 16384
	MaxImagePixels = 64 << 20
)

// Resolver fetches and decodes media. It is safe for concurrent use.
type Resolver struct {
	fetcher *fetch.Fetcher
	decoder *media.Decoder
	// Stage, when set, receives the time spent fetching and decoding (DESIGN.md §10 stages
	// `fetch` and `decode`).
	Stage func(stage string, d time.Duration)
	// CacheResult, when set, receives "hit" or "miss" for every decode-cache lookup: a video's,
	// and an image's with ImagePixels (imagecache.go).
	CacheResult func(result string)
	// ImageIdentity is how Image computes an identity (imagecache.go); the zero value is
	// ImagePixels. Set it before the resolver is used.
	ImageIdentity ImageIdentity
	// Revalidated, when set, is called for every video whose URL answered 304 Not Modified to
	// a conditional request, so its earlier result was reused (revalidate.go).
	Revalidated func()
	// Codecs is the video codec allow-list (`media { codecs … }`; nil: vp8, vp9): a clip of
	// another codec is unsupported_codec, whatever the linked FFmpeg decodes.
	Codecs mediaport.Codecs

	reval        revalidated
	imageDecodes atomic.Int64             // pixel decodes run (imagecache.go), for ImageDecodes
	lastDigest   atomic.Pointer[digested] // digest.go
}

// New returns a resolver over a fetcher and a decoder.
func New(f *fetch.Fetcher, d *media.Decoder) *Resolver { return &Resolver{fetcher: f, decoder: d} }

var _ mediaport.Media = (*Resolver)(nil)

// stage reports one stage that began at t to the Stage hook and to the request's stage observer
// (mediaport.WithStageObserver), if any.
func (r *Resolver) stage(ctx context.Context, name string, t time.Time) {
	d := time.Since(t)
	if r.Stage != nil {
		r.Stage(name, d)
	}
	mediaport.ObserveStage(ctx, name, t, d)
}

// Video fetches url and decodes it with the frames contract c samples; the result's identity
// comes from the decode cache when the same bytes were decoded under the same contract before.
// A URL fetched before with validators is revalidated instead (revalidate.go): a 304 reuses
// the earlier result without reading the body. The fetched bytes stay reserved in the fetcher's
// budget until the decode ends.
func (r *Resolver) Video(ctx context.Context, url string, c *layout.Contract) (*mediaport.VideoInfo, error) {
	return r.videoRevalidated(ctx, url, c)
}

// DecodeVideo is Video for bytes already in memory.
func (r *Resolver) DecodeVideo(ctx context.Context, data []byte, c *layout.Contract) (*mediaport.VideoInfo, error) {
	digest, err := r.contractDigest(c)
	if err != nil {
		return nil, reason.Wrap(reason.ContractUnsupported, err, "hashing the contract")
	}
	sampler := func(total int, st media.Stats) ([]int, error) {
		idx, err := mediaport.Sampler(c, total, st.FPS, st.Width, st.Height)
		if err != nil {
			return nil, reason.Wrap(reason.LayoutError, err, "sampling frames")
		}
		return idx, nil
	}
	t := time.Now()
	res, err := r.decoder.Identify(ctx, data, sampler, "contract:"+digest)
	r.stage(ctx, "decode", t)
	if err != nil {
		return nil, err
	}
	if !r.Codecs.Allows(res.Stats.Codec) {
		// the decoder refuses a codec off its own list before decoding (DecoderConfig.Codecs);
		// this catches a resolver whose list is narrower than its decoder's
		return nil, reason.New(reason.UnsupportedCodec, "decoding video: codec %s is not in the codec allow-list (%s)", res.Stats.Codec, r.Codecs)
	}
	if r.CacheResult != nil {
		if res.Cached {
			r.CacheResult("hit")
		} else {
			r.CacheResult("miss")
		}
	}
	return &mediaport.VideoInfo{
		Identity:        res.Identity,
		Codec:           res.Stats.Codec,
		DecodedFrames:   res.Stats.DecodedFrames,
		ContainerFrames: res.Stats.ContainerFrames(),
		SourceFPS:       res.Stats.FPS,
		Width:           res.Stats.Width,
		Height:          res.Stats.Height,
		Indices:         res.Indices,
	}, nil
}

// ImageDecodes is the number of image pixel decodes this resolver ran (cache misses that
// decoded, not the callers that joined one): the single-flight's measure (imagecache.go).
func (r *Resolver) ImageDecodes() int64 { return r.imageDecodes.Load() }

// CheckURL applies the fetcher's network-free URL rules (fetch.Fetcher.Check).
func (r *Resolver) CheckURL(url string) error { return r.fetcher.Check(url) }

// Image fetches url and computes its identity under ImageIdentity (imagecache.go): with
// ImagePixels from the decode cache (keyed by XXH3-128 of the bytes) or by decoding it
// (DecodeImage), with ImageBytes from its bytes and header. The bytes stay reserved in the
// fetcher's budget until then.
//
// An http(s) URL fetched before with validators (ETag, Last-Modified) is fetched with a
// conditional request, and a 304 Not Modified reuses the earlier identity without reading the
// bytes, as for videos (revalidate.go, imageRevalidated).
func (r *Resolver) Image(ctx context.Context, url string) (*mediaport.ImageInfo, error) {
	return r.imageRevalidated(ctx, url)
}

// identifyImage is the identity of fetched bytes (imagecache.go), timed as the "decode" stage.
func (r *Resolver) identifyImage(ctx context.Context, data []byte) (info *mediaport.ImageInfo, err error) {
	defer r.stage(ctx, "decode", time.Now())
	defer func() { err = keyed(data, err) }()
	// The decoded pixels are reserved in the media budget too: a header is a few bytes, and a
	// 118-byte BMP claiming 8192×8192 made the decoder allocate 256 MiB before it failed.
	return r.imageInfo(ctx, data, func(n int64) (func(), error) { return r.fetcher.Reserve(ctx, n) })
}

// decodedBytesPerPixel bounds what decoding allocates per pixel of the header's size: the
// decoder's own image (at most 8 bytes, a 16-bit RGBA PNG or TIFF) and the canvas conversion
// (at most 4 bytes, RGBA).
const decodedBytesPerPixel = 12

// DecodeImage decodes an image and computes its identity: XXH3-64 (seed 0) over Dynamo's
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
//   - frame_too_large (400): the header's width or height above MaxImageSide, or more than
//     MaxImagePixels pixels.
//   - identity_error (a fallback): a decoder panicked on the input (recovered, as the video
//     decoder's panics are).
func DecodeImage(data []byte) (info *mediaport.ImageInfo, err error) {
	return decodeImage(data, nil)
}

// decodeImage is DecodeImage with the decoded bytes reserved (reserve, when not nil, is called
// with the bound on them once the header's size is known and within the limits, and released
// when the decode ends; its error, reason.MediaBusy, is returned as it is: a fallback).
func decodeImage(data []byte, reserve func(n int64) (release func(), err error)) (info *mediaport.ImageInfo, err error) {
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
	return &mediaport.ImageInfo{Identity: id, Width: px.w, Height: px.h}, nil
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
// decode (decodeImage) and the bytes identity (imageHeader) make before anything else: a format
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
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > MaxImageSide || cfg.Height > MaxImageSide || cfg.Width*cfg.Height > MaxImagePixels {
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

// keyed wraps a fallback error of fetched bytes in a mediaport.KeyedError carrying XXH3-128 of
// the bytes (the affinity key, routing/router affinity.go); client errors and nil pass unchanged.
func keyed(data []byte, err error) error {
	if err == nil || reason.CodeOf(err).IsClientError() {
		return err
	}
	return &mediaport.KeyedError{Key: xxh3.Hash128(data).Bytes(), Err: err}
}
