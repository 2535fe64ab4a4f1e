package mediaresolver

import (
	"container/list"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// maxRevalidated bounds the URLs whose validators and video result are kept for revalidation.
const maxRevalidated = 4096

// revalidated remembers, per (contract digest, URL), the validators of the last 200 response
// and the video result decoded from its bytes, least recently used evicted beyond
// maxRevalidated. The identity stays a function of the decoded content: an entry only says
// which content a validator names.
type revalidated struct {
	mu sync.Mutex
	m  map[string]*list.Element // key → *revalEntry
	ll list.List                // front: most recently used

	// inflight holds the conditional request in flight per key: a request for a clip that is
	// being revalidated waits for that answer instead of sending its own (16 clients asking for
	// the same clip at once cost one round trip, not 16).
	inflight map[string]*revalCall
}

// revalCall is one conditional request in flight; notModified is set before done is closed.
type revalCall struct {
	done        chan struct{}
	notModified bool
}

// join returns the request in flight for key and false, or a new one that the caller sends
// and ends with finish, and true.
func (c *revalidated) join(key string) (*revalCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call, ok := c.inflight[key]; ok {
		return call, false
	}
	if c.inflight == nil {
		c.inflight = make(map[string]*revalCall)
	}
	call := &revalCall{done: make(chan struct{})}
	c.inflight[key] = call
	return call, true
}

// finish records the answer of call and wakes the requests waiting for it.
func (c *revalidated) finish(key string, call *revalCall, notModified bool) {
	c.mu.Lock()
	if c.inflight[key] == call {
		delete(c.inflight, key)
	}
	c.mu.Unlock()
	call.notModified = notModified
	close(call.done)
}

type revalEntry struct {
	key  string
	v    fetch.Validators
	info mediaport.VideoInfo
}

func (c *revalidated) get(key string) (revalEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return *e.Value.(*revalEntry), true
	}
	return revalEntry{}, false
}

func (c *revalidated) put(key string, v fetch.Validators, info *mediaport.VideoInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*list.Element)
	}
	ent := &revalEntry{key: key, v: v, info: *info}
	ent.info.Indices = slices.Clone(info.Indices)
	if e, ok := c.m[key]; ok {
		e.Value = ent
		c.ll.MoveToFront(e)
		return
	}
	c.m[key] = c.ll.PushFront(ent)
	for c.ll.Len() > maxRevalidated {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.m, last.Value.(*revalEntry).key)
	}
}

func (c *revalidated) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.Remove(e)
		delete(c.m, key)
	}
}

// videoRevalidated is Video with revalidation (issue 14): a URL fetched before with an ETag or
// Last-Modified is fetched with a conditional request, and a 304 Not Modified returns the
// result decoded from the earlier bytes without reading or decoding anything. A URL without
// validators is fetched and decoded as before; a 200 replaces the remembered validators.
func (r *Resolver) videoRevalidated(ctx context.Context, url string, c *layout.Contract) (*mediaport.VideoInfo, error) {
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		// data: and file: have no validators: no key (a data: URL is the whole clip) to build
		return r.videoFetch(ctx, url, c)
	}
	digest, err := r.contractDigest(c)
	if err != nil {
		return r.videoFetch(ctx, url, c) // DecodeVideo reports the contract error
	}
	key := digest + "\x00" + url
	return revalidate(ctx, r, key, url, r.notModified, func(known bool, data []byte, v fetch.Validators, err error) (*mediaport.VideoInfo, error) {
		return r.fetched(ctx, key, known, data, v, err, c)
	})
}

// revalidate fetches url with a conditional request when key has a remembered entry; both
// kinds (videoRevalidated, imageRevalidated) share it. Concurrent requests for one known key
// send one conditional request between them: the waiters reuse a 304 (unchanged of the
// remembered entry), and send their own request on anything else. fetched gets a 200's bytes,
// the validators and the fetch error (known: key had an entry); the bytes stay reserved in the
// fetcher's budget until fetched returns.
func revalidate[T any](ctx context.Context, r *Resolver, key, url string, unchanged func(*revalEntry) T,
	fetched func(known bool, data []byte, v fetch.Validators, err error) (T, error)) (T, error) {
	var none T
	prev, known := r.reval.get(key)
	t := time.Now()
	if known {
		call, leader := r.reval.join(key)
		if !leader {
			// Another request is revalidating this URL: its answer is as fresh as ours
			// would be. A 304 reuses the remembered result; anything else, our own request.
			select {
			case <-call.done:
			case <-ctx.Done():
				r.stage(ctx, "fetch", t)
				return none, ctx.Err()
			}
			if cur, ok := r.reval.get(key); ok && call.notModified {
				r.stage(ctx, "fetch", t)
				return unchanged(&cur), nil
			}
		} else {
			finished := false
			defer func() {
				if !finished { // the fetch panicked: let the waiting requests send their own
					r.reval.finish(key, call, false)
				}
			}()
			data, v, release, err := r.fetcher.FetchConditionalHeld(ctx, url, prev.v)
			defer release()
			r.stage(ctx, "fetch", t)
			notModified := errors.Is(err, fetch.ErrNotModified)
			r.reval.finish(key, call, notModified) // before a decode: the waiting requests need only the answer
			finished = true
			if notModified {
				return unchanged(&prev), nil
			}
			return fetched(known, data, v, err)
		}
	}
	data, v, release, err := r.fetcher.FetchConditionalHeld(ctx, url, prev.v)
	defer release()
	r.stage(ctx, "fetch", t)
	if errors.Is(err, fetch.ErrNotModified) && known {
		return unchanged(&prev), nil
	}
	return fetched(known, data, v, err)
}

// notModified is the remembered result of a clip its URL said is unchanged (a copy).
func (r *Resolver) notModified(e *revalEntry) *mediaport.VideoInfo {
	if r.Revalidated != nil {
		r.Revalidated()
	}
	info := e.info
	info.Indices = slices.Clone(e.info.Indices)
	return &info
}

// fetched decodes a clip fetched whole (a 200) and remembers its validators with the result.
func (r *Resolver) fetched(ctx context.Context, key string, known bool, data []byte, v fetch.Validators, err error, c *layout.Contract) (*mediaport.VideoInfo, error) {
	if err != nil {
		return nil, err
	}
	info, err := r.DecodeVideo(ctx, data, c)
	err = keyed(data, err)
	if err == nil && v.Revalidatable() {
		r.reval.put(key, v, info)
	} else if known {
		r.reval.remove(key)
	}
	return info, err
}

// videoFetch fetches url unconditionally and decodes it, the bytes reserved in the fetcher's
// budget until the decode ends.
func (r *Resolver) videoFetch(ctx context.Context, url string, c *layout.Contract) (*mediaport.VideoInfo, error) {
	data, release, err := r.fetchHeld(ctx, url)
	defer release()
	if err != nil {
		return nil, err
	}
	info, err := r.DecodeVideo(ctx, data, c)
	return info, keyed(data, err)
}

// fetchHeld is fetch.Fetcher.FetchHeld timed as the "fetch" stage: release (never nil) gives the
// bytes' reservation in the fetcher's budget back.
func (r *Resolver) fetchHeld(ctx context.Context, url string) (data []byte, release func(), err error) {
	defer r.stage(ctx, "fetch", time.Now())
	return r.fetcher.FetchHeld(ctx, url)
}
