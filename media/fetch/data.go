package fetch

import (
	"context"
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/kvroute/kvroute/reason"
)

// fetchData decodes an RFC 2397 data: URL, "data:[<mediatype>][;base64],<data>". The media type is
// ignored (the decoder sniffs the container). Base64 data follows the WHATWG "forgiving-base64 decode"
// (https://infra.spec.whatwg.org/#forgiving-base64-decode): percent-escapes are decoded first, ASCII
// whitespace is ignored, the '=' padding is optional, and any other non-alphabet byte fails. Other data
// is percent-decoded. Errors: reason.MediaFetchFailed for malformed data, reason.MediaTooLarge above
// MaxBytes (checked on the exact decoded length before decoding), reason.MediaBusy when the decoded
// length cannot be reserved in the budget. The URL text itself is part of the request body (bounded
// by the body cap), so only the decoded copy is reserved.
func (f *Fetcher) fetchData(ctx context.Context, rawURL string, h *hold) ([]byte, error) {
	rest := rawURL[len("data:"):]
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, reason.New(reason.MediaFetchFailed, "malformed data URL: no comma")
	}
	isBase64 := false
	if i := strings.LastIndexByte(meta, ';'); i >= 0 && strings.EqualFold(strings.TrimSpace(meta[i+1:]), "base64") {
		isBase64 = true
	}
	if strings.IndexByte(payload, '%') >= 0 {
		s, err := url.PathUnescape(payload)
		if err != nil {
			return nil, reason.Wrap(reason.MediaFetchFailed, err, "malformed data URL: bad percent-encoding")
		}
		payload = s
	}
	if !isBase64 {
		if int64(len(payload)) > f.p.maxBytes {
			return nil, reason.New(reason.MediaTooLarge, "media is larger than %d bytes", f.p.maxBytes)
		}
		if err := h.reserve(ctx, int64(len(payload))); err != nil {
			return nil, err
		}
		return []byte(payload), nil
	}
	payload = forgivingBase64(payload)
	// Exact decoded size, checked before allocating it.
	if int64(base64.RawStdEncoding.DecodedLen(len(payload))) > f.p.maxBytes {
		return nil, reason.New(reason.MediaTooLarge, "media is larger than %d bytes", f.p.maxBytes)
	}
	if err := h.reserve(ctx, int64(base64.RawStdEncoding.DecodedLen(len(payload)))); err != nil {
		return nil, err
	}
	b, err := base64.RawStdEncoding.DecodeString(payload)
	if err != nil {
		return nil, reason.Wrap(reason.MediaFetchFailed, err, "malformed data URL: invalid base64")
	}
	return b, nil
}

// forgivingBase64 prepares s (already percent-decoded) for an unpadded standard base64 decode, as the
// WHATWG forgiving-base64 decode does: ASCII whitespace removed, then up to two trailing '=' removed when
// the length is a multiple of 4. Any '=' left fails the decode.
func forgivingBase64(s string) string {
	if strings.ContainsAny(s, " \t\n\f\r") {
		s = strings.Map(func(r rune) rune {
			switch r {
			case ' ', '\t', '\n', '\f', '\r':
				return -1
			}
			return r
		}, s)
	}
	if len(s)%4 == 0 {
		s = strings.TrimSuffix(s, "=")
		s = strings.TrimSuffix(s, "=")
	}
	return s
}
