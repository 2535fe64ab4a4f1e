package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kvroute/kvroute/reason"
)

// userAgent is sent on every http(s) request.
const userAgent = "kvroute-media-fetch/1"

// Fetcher fetches media under one Config. It is safe for concurrent use.
type Fetcher struct {
	p      *policy
	client *http.Client
	// transport is owned by client; kept to close idle connections.
	transport *http.Transport
}

// New returns a Fetcher for cfg; nil means DefaultConfig(). It fails when a field is invalid (the
// error names the field) or when FileRoot does not resolve to a directory.
func New(cfg *Config) (*Fetcher, error) {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	p, err := compile(cfg)
	if err != nil {
		return nil, fmt.Errorf("configuring media fetch: %w", err)
	}
	var r Resolver = net.DefaultResolver
	if cfg.Resolver != nil {
		r = cfg.Resolver
	}
	d := newGuardedDialer(p, r)
	t := &http.Transport{
		Proxy:                  nil, // never HTTP(S)_PROXY: a proxy would connect on our behalf, unchecked
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    p.timeout,
		ResponseHeaderTimeout:  p.timeout,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true, // media is compressed already; no transparent gzip expansion
		MaxIdleConns:           64,
		// A media origin is revalidated on every request of a repeated clip (a conditional GET
		// answered 304): at 16 requests in flight, 4 idle connections per host made most of them
		// dial again (a TCP handshake each).
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}
	if cfg.TLS != nil {
		t.TLSClientConfig = cfg.TLS.Clone()
	}
	f := &Fetcher{p: p, transport: t}
	f.client = &http.Client{Transport: t, CheckRedirect: f.checkRedirect}
	return f, nil
}

// Close releases idle connections. The Fetcher stays usable.
func (f *Fetcher) Close() { f.transport.CloseIdleConnections() }

// Fetch returns the bytes behind rawURL (http, https, data:, or file: under Config.FileRoot), at most
// Config.MaxBytes of them, within Config.Timeout and ctx. Errors are *reason.Error (package doc).
// The bytes are reserved in Config.Budget while they are read and released on return; a caller
// that keeps them for a while (decoding) uses FetchHeld.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) ([]byte, error) {
	b, release, err := f.FetchHeld(ctx, rawURL)
	release()
	return b, err
}

// FetchHeld is Fetch with the returned bytes still reserved in Config.Budget until release is
// called (once; release is never nil, also on error). Without room in the budget within its wait
// the error is reason.MediaBusy.
func (f *Fetcher) FetchHeld(ctx context.Context, rawURL string) (data []byte, release func(), err error) {
	h := &hold{b: f.p.budget}
	data, err = f.fetch(ctx, rawURL, h)
	if err != nil {
		h.release()
		return nil, func() {}, err
	}
	return data, h.release, nil
}

// Reserve takes n more bytes of Config.Budget for what a caller builds from fetched media (an
// image's decoded pixels), waiting as a fetch does; release gives them back (once; never nil).
// Without room within the wait the error is reason.MediaBusy, at once when n exceeds the whole
// budget. Without a budget it reserves nothing.
func (f *Fetcher) Reserve(ctx context.Context, n int64) (release func(), err error) {
	h := &hold{b: f.p.budget}
	if err := h.reserve(ctx, n); err != nil {
		h.release()
		return func() {}, err
	}
	return h.release, nil
}

func (f *Fetcher) fetch(ctx context.Context, rawURL string, h *hold) ([]byte, error) {
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || !validScheme(scheme) {
		return nil, reason.New(reason.MediaURLBlocked, "unsupported media URL scheme")
	}
	switch strings.ToLower(scheme) {
	case "data":
		return f.fetchData(ctx, rawURL, h)
	case "file":
		return f.fetchFile(ctx, rawURL, h)
	case "http", "https":
		return f.fetchHTTP(ctx, rawURL, h)
	}
	return nil, reason.New(reason.MediaURLBlocked, "unsupported media URL scheme %q", strings.ToLower(scheme))
}

// Check applies the rules that need no network to rawURL: the scheme, file: only with a FileRoot,
// and for http(s) the host syntax, the domain list and IP literals. A host name that resolves to a
// refused address passes here and is refused by Fetch at dial time. The router uses Check on
// media it forwards without fetching (fallbacks), so a request naming a refused address is
// rejected whatever path it takes. Errors are *reason.Error with media_url_blocked.
func (f *Fetcher) Check(rawURL string) error {
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || !validScheme(scheme) {
		return reason.New(reason.MediaURLBlocked, "unsupported media URL scheme")
	}
	switch strings.ToLower(scheme) {
	case "data":
		return nil
	case "file":
		if f.p.fileRoot == "" {
			return reason.New(reason.MediaURLBlocked, "file: media URLs are not allowed")
		}
		return nil
	case "http", "https":
		u, err := url.Parse(rawURL)
		if err != nil {
			return reason.New(reason.MediaURLBlocked, "media URL does not parse")
		}
		u.Scheme = strings.ToLower(u.Scheme)
		return f.checkURL(u)
	}
	return reason.New(reason.MediaURLBlocked, "unsupported media URL scheme %q", strings.ToLower(scheme))
}

// validScheme reports whether s has the RFC 3986 scheme syntax.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// checkURL applies the pre-dial rules to one http(s) URL: scheme, host syntax, domain list and
// IP literals. It runs for the first URL and for every redirect target.
func (f *Fetcher) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return reason.New(reason.MediaURLBlocked, "unsupported media URL scheme %q", u.Scheme)
	}
	if u.Opaque != "" {
		return reason.New(reason.MediaURLBlocked, "media URL has no host")
	}
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if ps := u.Port(); ps != "" {
		n, err := strconv.ParseUint(ps, 10, 16)
		if err != nil || n == 0 {
			return reason.New(reason.MediaURLBlocked, "media URL has an invalid port")
		}
		port = uint16(n)
	}
	return f.p.checkHost(u.Hostname(), port)
}

// checkRedirect is the http.Client redirect policy: every hop gets checkURL, and the hop count is bounded.
// The dial guard checks the resolved address of each hop as well.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.p.maxRedirects {
		return reason.New(reason.MediaFetchFailed, "media host %q redirected more than %d times",
			hostOf(via[0].URL), f.p.maxRedirects)
	}
	if err := f.checkURL(req.URL); err != nil {
		return err
	}
	req.Header.Del("Referer") // the previous URL may carry signed query parameters
	return nil
}

func (f *Fetcher) fetchHTTP(ctx context.Context, rawURL string, h *hold) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, reason.Wrap(reason.MediaURLBlocked, err, "media URL is malformed")
	}
	if err := f.checkURL(u); err != nil {
		return nil, err
	}
	host := hostOf(u)
	ctx, cancel := context.WithTimeout(ctx, f.p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, reason.Wrap(reason.MediaURLBlocked, err, "media URL is malformed")
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "*/*")
	setConditional(ctx, req) // FetchConditionalHeld (conditional.go)
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.mapErr(ctx, err, host)
	}
	defer resp.Body.Close()
	if err := conditionalResult(ctx, resp); err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, reason.New(reason.MediaFetchFailed, "media host %q answered %d", hostOf(resp.Request.URL),
			resp.StatusCode)
	}
	if resp.ContentLength > f.p.maxBytes {
		return nil, reason.New(reason.MediaTooLarge, "media is larger than %d bytes", f.p.maxBytes)
	}
	b, err := readCapped(ctx, resp.Body, f.p.maxBytes, resp.ContentLength, h)
	if err != nil {
		return nil, f.mapErr(ctx, err, host)
	}
	return b, nil
}

// maxHintAlloc bounds the first buffer sized from a declared length (8 MiB).
const maxHintAlloc = 8 << 20

// Chunk sizes of readCapped without a usable declared length: the first chunk, and the largest.
const (
	minChunk = 32 << 10
	maxChunk = 4 << 20
)

// errTooLarge is returned by readCapped when the source has more than the limit.
var errTooLarge = errors.New("size limit exceeded")

// readCapped reads r to EOF and returns its bytes, reading at most limit+1 bytes from r. More than
// limit bytes gives a reason.MediaTooLarge error. Memory grows with the bytes received: reads go
// into chunks that double with the total up to maxChunk (4 MiB) and never reach past limit+1, so
// the chunks hold at most max(total, 32 KiB)+4 MiB; at EOF they are copied once into a slice of
// the exact length (no chunk left over when one suffices). A declared length (sizeHint, -1 if
// unknown) of at most maxHintAlloc sizes the first chunk to hint+1, so EOF needs no copy; a
// server's declaration alone cannot make the router allocate much. Every allocation is reserved
// with h first (reason.MediaBusy when the budget stays full); on success the returned bytes stay
// reserved in h, the chunks' reservation is given back.
func readCapped(ctx context.Context, r io.Reader, limit, sizeHint int64, h *hold) ([]byte, error) {
	var (
		chunks   [][]byte
		total    int64 // bytes read
		reserved int64 // bytes reserved for chunks
	)
	grow := func() error {
		size := max(min(total, maxChunk), minChunk)
		if len(chunks) == 0 && sizeHint >= 0 && sizeHint < maxHintAlloc {
			size = sizeHint + 1
		}
		size = min(size, limit+1-total)
		if err := h.reserve(ctx, size); err != nil {
			return err
		}
		reserved += size
		chunks = append(chunks, make([]byte, 0, size))
		return nil
	}
	for {
		if len(chunks) == 0 || len(chunks[len(chunks)-1]) == cap(chunks[len(chunks)-1]) {
			if total > limit {
				h.unreserve(reserved)
				return nil, reason.Wrap(reason.MediaTooLarge, errTooLarge, "media is larger than %d bytes", limit)
			}
			if err := grow(); err != nil {
				h.unreserve(reserved)
				return nil, err
			}
		}
		c := chunks[len(chunks)-1]
		n, err := r.Read(c[len(c):cap(c)])
		chunks[len(chunks)-1] = c[:len(c)+n]
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			h.unreserve(reserved)
			return nil, err
		}
	}
	if total > limit {
		h.unreserve(reserved)
		return nil, reason.Wrap(reason.MediaTooLarge, errTooLarge, "media is larger than %d bytes", limit)
	}
	if len(chunks) == 1 {
		h.unreserve(reserved - int64(cap(chunks[0]))) // nothing: kept whole
		return chunks[0], nil
	}
	if err := h.reserve(ctx, total); err != nil {
		h.unreserve(reserved)
		return nil, err
	}
	out := make([]byte, 0, total)
	for i, c := range chunks {
		out = append(out, c...)
		chunks[i] = nil
	}
	h.unreserve(reserved)
	return out, nil
}

// mapErr turns a client or body error into a *reason.Error. ctx is the fetch's own context (with the
// timeout); host is named in the message.
func (f *Fetcher) mapErr(ctx context.Context, err error, host string) error {
	var re *reason.Error
	if errors.As(err, &re) {
		return re
	}
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout() {
		return reason.Wrap(reason.MediaFetchTimeout, err, "fetching media from host %q timed out", host)
	}
	if errors.Is(err, context.Canceled) {
		return reason.Wrap(reason.MediaFetchFailed, err, "fetching media from host %q was canceled", host)
	}
	return reason.Wrap(reason.MediaFetchFailed, err, "fetching media from host %q failed", host)
}

// hostOf is the host name of u as shown in messages: lowercase, no port, no user info.
func hostOf(u *url.URL) string { return normalizeHost(u.Hostname()) }
