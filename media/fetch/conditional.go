package fetch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
)

// Validators are the HTTP cache validators of a fetched URL (RFC 9110 §8.8): the ETag and
// Last-Modified response headers and the body length. A URL whose response has neither header
// cannot be revalidated.
type Validators struct {
	ETag         string
	LastModified string
	Length       int64
}

// Revalidatable reports whether v can make a conditional request.
func (v Validators) Revalidatable() bool { return v.ETag != "" || v.LastModified != "" }

// ErrNotModified is returned by FetchConditionalHeld when the server answered 304 Not Modified:
// the bytes behind the URL are the ones the validators describe.
var ErrNotModified = errors.New("media not modified")

type conditionalKey struct{}

// conditional carries a conditional fetch through fetchHTTP: the validators to send and, after
// a 200, the ones the response carried.
type conditional struct {
	send, got Validators
}

// FetchConditionalHeld is FetchHeld for an http(s) URL whose earlier response had validators
// prev: it sends If-None-Match / If-Modified-Since and returns ErrNotModified on a 304 (no body
// read, nothing reserved). On a 200 it returns the bytes, still reserved until release, and the
// new response's validators. With prev not revalidatable, and for data: and file: URLs, it is
// FetchHeld (the returned validators are then those of the response, empty for data: and
// file:). release is never nil.
func (f *Fetcher) FetchConditionalHeld(ctx context.Context, rawURL string, prev Validators) (data []byte, v Validators, release func(), err error) {
	c := &conditional{send: prev}
	data, release, err = f.FetchHeld(context.WithValue(ctx, conditionalKey{}, c), rawURL)
	if err != nil {
		return nil, Validators{}, release, err
	}
	c.got.Length = int64(len(data))
	return data, c.got, release, nil
}

// setConditional adds the conditional headers of a FetchConditionalHeld call to req.
func setConditional(ctx context.Context, req *http.Request) {
	c, _ := ctx.Value(conditionalKey{}).(*conditional)
	if c == nil {
		return
	}
	if c.send.ETag != "" {
		req.Header.Set("If-None-Match", c.send.ETag)
	}
	if c.send.LastModified != "" {
		req.Header.Set("If-Modified-Since", c.send.LastModified)
	}
}

// conditionalResult handles the response of a FetchConditionalHeld call: ErrNotModified for a 304
// answering validators that were sent, else it records the response's validators and returns nil.
func conditionalResult(ctx context.Context, resp *http.Response) error {
	c, _ := ctx.Value(conditionalKey{}).(*conditional)
	if c == nil {
		return nil
	}
	if resp.StatusCode == http.StatusNotModified && c.send.Revalidatable() {
		return ErrNotModified
	}
	c.got = Validators{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified")}
	if n, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err == nil {
		c.got.Length = n
	}
	return nil
}
