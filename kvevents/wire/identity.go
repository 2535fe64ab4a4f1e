package wire

import (
	"strconv"
	"strings"
)

// Identity is a media item's content identity (DESIGN.md §3; vLLM's mm_hash once forwarded): XXH3-64
// over the decoded pixels of an image, or over the sampled frames of a video. 0 means "none".
type Identity uint64

// uuidZeros pads the 16 hex digits of an identity to the 64-character uuid kvroute forwards.
var uuidZeros = strings.Repeat("0", 48)

// Hex is the identity as 16 lowercase hex digits: the form logs, explain output and the CLI print.
func (id Identity) Hex() string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[id&0xf]
		id >>= 4
	}
	return string(b[:])
}

// UUID is the uuid kvroute forwards for the identity: 16 lowercase hex digits and 48 zeros
// (DESIGN.md §1 step 6). vLLM uses it verbatim as the item's multimodal hash, so it is also the
// identifier a worker's BlockStored extra_keys name the item by (DESIGN.md §2).
func (id Identity) UUID() string { return id.Hex() + uuidZeros }

// ParseUUID reads an identity from the uuid form UUID writes (exactly 16 lowercase hex digits and
// 48 zeros); ok is false for any other string.
func ParseUUID(s string) (Identity, bool) {
	if len(s) != 64 || s[16:] != uuidZeros {
		return 0, false
	}
	for _, c := range s[:16] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s[:16], 16, 64)
	return Identity(v), err == nil
}

// MediaKey is one media item named in a stored block's extra_keys: its identity and, in the
// current vLLM form `[identifier, placeholder_offset − block_start]`, the offset of the item's
// placeholder range relative to the block's first token (HasOffset false for the bare form).
type MediaKey struct {
	Identity  Identity
	Offset    int64
	HasOffset bool
}
