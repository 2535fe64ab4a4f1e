package mediaresolver

import (
	"context"
	"fmt"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/picture"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// ImageIdentity is how an image's identity is computed (media { image_identity }, DESIGN.md §6
// "Images"). Both are exact: a forwarded identity names one picture, since equal identities
// come from equal pixels (ImagePixels) or equal encoded bytes, which decode to equal pixels
// (ImageBytes); what differs is what they find equal and what they check.
type ImageIdentity uint8

const (
	// ImagePixels (the default): XXH3-64 over the decoded pixels (picture.Decode), so the same
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
// bytes, then the header (ImageBytes, picture.Header), or the decode cache and, on a miss,
// picture.DecodeReserved (ImagePixels), whose reserve it is.
//
// Equal bytes decode once: a decode runs under the decoder's single-flight (media.Decoder.Share)
// keyed like the cache, so 32 copies of one image in a request, or in concurrent requests, wait
// for one decode (and reserve its pixels once) instead of each decoding them; the callers that
// joined count as decode-cache hits, the one that decoded as the miss.
func (r *Resolver) imageInfo(ctx context.Context, data []byte, reserve func(int64) (func(), error)) (*mediaport.ImageInfo, error) {
	sum := xxh3.Hash128(data)
	if r.ImageIdentity == ImageBytes {
		return imageInfo(picture.Header(data, sum))
	}
	if r.decoder == nil {
		r.imageDecodes.Add(1)
		return imageInfo(picture.DecodeReserved(data, reserve))
	}
	key := media.CacheKey{Content: sum, Sampler: imageCacheKey}
	res, err := r.decoder.Share(ctx, key, func() (*media.Result, error) {
		r.imageDecodes.Add(1)
		info, err := picture.DecodeReserved(data, reserve)
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

// imageInfo is the port's form of a picture's identity and size.
func imageInfo(p *picture.Info, err error) (*mediaport.ImageInfo, error) {
	if err != nil {
		return nil, err
	}
	return &mediaport.ImageInfo{Identity: p.Identity, Width: p.Width, Height: p.Height}, nil
}
