package mediaport

import (
	"context"
	"errors"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/routing/layout"
)

// Media fetches and decodes the media items of a request (DESIGN.md §1 step 3). Implementations
// must be safe for concurrent use and bound their own time and memory (DESIGN.md §6). Errors
// carry reason codes (reason): client errors (media_url_blocked, media_undecodable, …)
// reject the request, anything else makes it fall back to text-prefix routing.
type Media interface {
	// Video fetches url, decodes it and samples its frames the way a worker with contract c
	// does, and returns the clip's identity and geometry.
	Video(ctx context.Context, url string, c *layout.Contract) (*VideoInfo, error)
	// Image fetches url, decodes it and returns its content identity and size.
	Image(ctx context.Context, url string) (*ImageInfo, error)
	// CheckURL applies the URL rules that need no network (scheme, IP literals, domain list).
	// The router calls it on every media URL it forwards, fetched or not, so a request naming a
	// refused address is rejected (media_url_blocked) even when it falls back.
	CheckURL(url string) error
}

// errNoFrames is returned by Sampler when the contract's sampler picks no frame.
var errNoFrames = errors.New("the sampler selected no frames")

// VideoInfo is what the router needs of one decoded clip.
type VideoInfo struct {
	// Identity is the DESIGN.md §3 identity (never 0).
	Identity kv.Identity
	// Codec is "vp8" or "vp9".
	Codec string
	// DecodedFrames is the presentable frame count; ContainerFrames the count a loader that trusts
	// the container sees (0 when the container says nothing).
	DecodedFrames, ContainerFrames int
	// SourceFPS is the stream's average frame rate (source_fps).
	SourceFPS float64
	// Width and Height are the frame size in pixels.
	Width, Height int
	// Indices are the sampled frame indices the identity covers.
	Indices []int
}

// ImageInfo is what the router needs of one decoded image.
type ImageInfo struct {
	// Identity is XXH3-64 over the decoded pixels (Dynamo's canonical_content_hash layout).
	Identity kv.Identity
	// Width and Height are the image size in pixels.
	Width, Height int
}

// Sampler returns the frame sampler of contract c for a clip of the given geometry: the indices
// layout.LayoutVideo picks. It is what Media implementations call once they know the frame count.
func Sampler(c *layout.Contract, total int, fps float64, width, height int) ([]int, error) {
	in := layout.VideoInput{TotalFrames: total, SourceFPS: fps, Width: width, Height: height}
	if c != nil && c.Adapter == layout.AdapterNemotronOmni {
		l, err := layout.LayoutNemotronVideoFor(c, in)
		if len(l.Indices) > 0 {
			return l.Indices, nil
		}
		if err == nil {
			err = errNoFrames
		}
		return nil, err
	}
	l, err := layout.LayoutVideo(c, in)
	if l != nil && len(l.Indices) > 0 {
		// Sampling succeeded; a later layout stage that fails is reported by the layout step.
		return l.Indices, nil
	}
	if err == nil {
		err = errNoFrames
	}
	return nil, err
}
