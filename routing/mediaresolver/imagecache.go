package mediaresolver

import (
	"context"
	"fmt"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// ImageIdentity is how an image's identity is computed (media { image_identity }, DESIGN.md §6
// "Images"). Both are exact: a forwarded identity names one picture, since equal identities
// come from equal pixels (ImagePixels) or equal encoded bytes, which decode to equal pixels
// (ImageBytes); what differs is what they find equal and what they check.
type ImageIdentity uint8

const (
	// ImagePixels (the default): XXH3-64 over the decoded pixels (DecodeImage), so the same
	// picture sent as PNG, JPEG or WebP has one identity. Every cold image is decoded.
	ImagePixels ImageIdentity = iota
	// ImageBytes: the identity is the low 64 bits of XXH3-128 of the encoded bytes, the
	// dimensions come from the header alone and no pixel is decoded. A re-encoded or
	// re-compressed copy of a picture is another identity, and a body that is corrupt past its
	// header is not detected here (the worker's decoder reports it).
	ImageBytes
)

// ParseImageIdentity reads "pixels" or "bytes".
func ParseImageIdentity(s string) (ImageIdentity, error) {
	switch s {
	case "pixels":
		return ImagePixels, nil
	case "bytes":
		return ImageBytes, nil
	}
	return 0, fmt.Errorf("image_identity %q: want pixels or bytes", s)
}

func (m ImageIdentity) String() string {
	if m == ImageBytes {
		return "bytes"
	}
	return "pixels"
}

// imageCacheKey is the decode cache's sampler key of a pixel identity: the image entries share
// the video decode cache (its entry and byte bounds, its hit/miss counts) under their own key
// space ("contract:<digest>" for videos). It names the identity rule: an entry is valid only for
// the rule that made it.
const imageCacheKey = "image:pixels:v1"

// imageInfo computes data's identity under the resolver's ImageIdentity: one XXH3-128 of the
// bytes, then the header (ImageBytes), or the decode cache and, on a miss, DecodeImage
// (ImagePixels). reserve is decodeImage's.
//
// Equal bytes decode once: a decode runs under the decoder's single-flight (media.Decoder.Share)
// keyed like the cache, so 32 copies of one image in a request, or in concurrent requests, wait
// for one decode (and reserve its pixels once) instead of each decoding them; the callers that
// joined count as decode-cache hits, the one that decoded as the miss.
func (r *Resolver) imageInfo(ctx context.Context, data []byte, reserve func(int64) (func(), error)) (*mediaport.ImageInfo, error) {
	sum := xxh3.Hash128(data)
	if r.ImageIdentity == ImageBytes {
		return imageHeader(data, sum)
	}
	if r.decoder == nil {
		r.imageDecodes.Add(1)
		return decodeImage(data, reserve)
	}
	key := media.CacheKey{Content: sum, Sampler: imageCacheKey}
	res, err := r.decoder.Share(ctx, key, func() (*media.Result, error) {
		r.imageDecodes.Add(1)
		info, err := decodeImage(data, reserve)
		if err != nil {
			return nil, err // errors are not cached: a bad image costs its decode every time
		}
		return &media.Result{Identity: info.Identity, Stats: media.Stats{Width: info.Width, Height: info.Height}}, nil
	})
	if r.decoder.Cache() != nil {
		if err == nil && res.Cached {
			r.cacheResult("hit")
		} else {
			r.cacheResult("miss") // decoded here, or the decode joined failed
		}
	}
	if err != nil {
		return nil, err
	}
	return &mediaport.ImageInfo{Identity: res.Identity, Width: res.Stats.Width, Height: res.Stats.Height}, nil
}

func (r *Resolver) cacheResult(result string) {
	if r.CacheResult != nil {
		r.CacheResult(result)
	}
}

// imageHeader is the ImageBytes identity of data (sum = XXH3-128(data)) with the header's
// dimensions, under the same format, size and plausibility checks as DecodeImage before its
// decode.
func imageHeader(data []byte, sum xxh3.Uint128) (info *mediaport.ImageInfo, err error) {
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
	return &mediaport.ImageInfo{Identity: id, Width: cfg.Width, Height: cfg.Height}, nil
}
