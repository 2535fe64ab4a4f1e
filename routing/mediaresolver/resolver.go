// Package mediaresolver is the media adapter of the router: it implements routing/mediaport.Media
// over media/fetch (the guarded fetch), media (video decode and identity) and media/picture (image
// decode and identity), adding what only the router's side knows: a contract's frame sampler, the
// image identity mode and the decode cache's keys, revalidation of known URLs, the affinity key of
// a fallback. kvroute's handler and kvroute-sim both use it, so the router and the simulated worker
// sample and hash a clip the same way. The media packages import nothing of routing
// (internal/importrules); this package is where the two meet.
package mediaresolver

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/media/picture"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// Image size caps: an image_url part larger than this is rejected (frame_too_large) before its
// pixels are decoded (media/picture's limits).
const (
	MaxImageSide   = picture.MaxSide
	MaxImagePixels = picture.MaxPixels
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

// keyed wraps a fallback error of fetched bytes in a mediaport.KeyedError carrying XXH3-128 of
// the bytes (the affinity key, routing/router affinity.go); client errors and nil pass unchanged.
func keyed(data []byte, err error) error {
	if err == nil || reason.CodeOf(err).IsClientError() {
		return err
	}
	return &mediaport.KeyedError{Key: xxh3.Hash128(data).Bytes(), Err: err}
}
