package mediaresolver

import (
	"context"
	"strings"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// imageRevalidated is Image with revalidation, as videoRevalidated (same store, same bound): an
// image URL answered with an ETag or Last-Modified is remembered with its identity, under its
// ImageIdentity mode, and fetched next time with a conditional request; a 304 Not Modified
// returns that identity without reading the bytes. The trust is the video path's: the media
// server's validator says which bytes the URL names (the worker fetches the URL itself anyway,
// so a server changing the object between two fetches is the same risk with or without it). A
// 200 replaces the entry; an error or a response without validators removes it. Concurrent
// requests for one known URL send one conditional request between them.
func (r *Resolver) imageRevalidated(ctx context.Context, url string) (*mediaport.ImageInfo, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		data, release, err := r.fetchHeld(ctx, url)
		defer release()
		if err != nil {
			return nil, err
		}
		return r.identifyImage(ctx, data)
	}
	key := "image:" + r.ImageIdentity.String() + "\x00" + url
	return revalidate(ctx, r, key, url, r.imageNotModified, func(known bool, data []byte, v fetch.Validators, err error) (*mediaport.ImageInfo, error) {
		return r.imageFetched(ctx, key, known, data, v, err)
	})
}

// imageNotModified is the remembered identity of an image its URL said is unchanged.
func (r *Resolver) imageNotModified(e *revalEntry) *mediaport.ImageInfo {
	if r.Revalidated != nil {
		r.Revalidated()
	}
	return &mediaport.ImageInfo{Identity: e.info.Identity, Width: e.info.Width, Height: e.info.Height}
}

// imageFetched identifies an image fetched whole (a 200) and remembers its validators with the
// identity; an error or a response without validators forgets the URL.
func (r *Resolver) imageFetched(ctx context.Context, key string, known bool, data []byte, v fetch.Validators, err error) (*mediaport.ImageInfo, error) {
	if err != nil {
		if known {
			r.reval.remove(key)
		}
		return nil, err
	}
	info, err := r.identifyImage(ctx, data)
	switch {
	case err == nil && v.Revalidatable():
		// the store's entry holds a video result; an image's is its identity and size
		r.reval.put(key, v, &mediaport.VideoInfo{Identity: info.Identity, Width: info.Width, Height: info.Height})
	case known:
		r.reval.remove(key)
	}
	return info, err
}
