package fetch

import (
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/kvroute/kvroute/routing/reason"
)

// fetchData decodes an RFC 2397 data: URL, "data:[<mediatype>][;base64],<data>". The media type is
// ignored (the decoder sniffs the container). Base64 data follows the WHATWG "forgiving-base64 decode"
// (https://infra.spec.whatwg.org/#forgiving-base64-decode): percent-escapes are decoded first, ASCII
// whitespace is ignored, the '=' padding is optional, and any other non-alphabet byte fails. Other data
// is percent-decoded. Errors: reason.MediaFetchFailed for malformed data, reason.MediaTooLarge above
// MaxBytes (checked on the encoded length before decoding).
func (f *Fetcher) fetchData(rawURL string) ([]byte, error) {
	rest := rawURL[len("data:"):]
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, reason.New(reason.MediaFetchFailed, "malformed data URL: no comma")
	}
	isBase64 := false
	if i := strings.LastIndexByte(meta, ';'); i >= 0 && strings.EqualFold(strings.TrimSpace(meta[i+1:]), "base64") {
		isBase64 = true
	}
	// The decoded size is at most len(payload) (percent form) or 3/4 of it (base64).
	bound := int64(len(payload))
	if isBase64 {
		bound = bound / 4 * 3
	}
	if bound > f.p.maxBytes {
		return nil, reason.New(reason.MediaTooLarge, "media is larger than %d bytes", f.p.maxBytes)
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
		return []byte(payload), nil
	}
	b, err := decodeBase64(payload)
	if err != nil {
		return nil, reason.Wrap(reason.MediaFetchFailed, err, "malformed data URL: invalid base64")
	}
	if int64(len(b)) > f.p.maxBytes {
		return nil, reason.New(reason.MediaTooLarge, "media is larger than %d bytes", f.p.maxBytes)
	}
	return b, nil
}

// decodeBase64 is the WHATWG forgiving-base64 decode of s (after percent-decoding): ASCII whitespace
// removed, then unpadded standard base64 with at most two trailing '=' when the length is a multiple of 4.
func decodeBase64(s string) ([]byte, error) {
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
	return base64.RawStdEncoding.DecodeString(s)
}
