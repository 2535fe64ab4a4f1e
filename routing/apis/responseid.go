package apis

import "bytes"

// MaxResponseIDScan bounds how much of a response body is looked at for the response id: vLLM
// writes the id first (a ResponsesResponse's first key; in a stream, inside the first event,
// response.created).
const MaxResponseIDScan = 64 << 10

// ScanResponseID returns the value of the first "id" key in b, a prefix of a /v1/responses answer
// (JSON, or SSE whose first event carries the response object), and whether it was found. A
// prefix that ends inside the value gives false: the caller scans again with more bytes. Ids are
// taken only when they are plain (no escapes), at most 256 bytes.
func ScanResponseID(b []byte) (string, bool) {
	key := []byte(`"id"`)
	for off := 0; ; {
		i := bytes.Index(b[off:], key)
		if i < 0 {
			return "", false
		}
		j := off + i + len(key)
		for j < len(b) && isSpace(b[j]) {
			j++
		}
		if j < len(b) && b[j] != ':' {
			off = j // a string "id" that is not a key
			continue
		}
		j++
		for j < len(b) && isSpace(b[j]) {
			j++
		}
		if j >= len(b) || b[j] != '"' {
			return "", false
		}
		end := bytes.IndexByte(b[j+1:], '"')
		if end < 0 || end > 256 {
			return "", false
		}
		v := b[j+1 : j+1+end]
		if end == 0 || bytes.IndexByte(v, '\\') >= 0 {
			return "", false
		}
		return string(v), true
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
