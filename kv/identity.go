package kv

import (
	"fmt"
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

// IsUUID reports whether s is in the uuid form UUID writes: 64 characters, the first 16 lowercase
// hex digits, the last 48 '0'. It is also how a worker's extra_keys names a forwarded item (vLLM uses
// the uuid verbatim; Dynamo lib/kv-router extra_keys.rs), so kvevents/normalize reads identities with it.
func IsUUID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < 16; i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	for i := 16; i < 64; i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// ParseUUID reads an identity from the uuid form (IsUUID); ok is false for any other string. It does
// not allocate: it runs once per media key of every stored block.
func ParseUUID(s string) (Identity, bool) {
	if !IsUUID(s) {
		return 0, false
	}
	var v uint64
	for i := 0; i < 16; i++ {
		c := s[i]
		if c <= '9' {
			v = v<<4 | uint64(c-'0')
		} else {
			v = v<<4 | uint64(c-'a'+10)
		}
	}
	return Identity(v), true
}

// ParseHex reads an identity from exactly 16 hex digits (the Hex form; upper case is accepted too, as
// strconv.ParseUint reads it). The error names the input.
func ParseHex(s string) (Identity, error) {
	if len(s) != 16 {
		return 0, fmt.Errorf("parsing identity %q: want 16 hex characters", s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing identity %q: %w", s, err)
	}
	return Identity(v), nil
}

// MediaKey is one media item named in a stored block's extra_keys: its identity and, in the
// current vLLM form `[identifier, placeholder_offset − block_start]`, the offset of the item's
// placeholder range relative to the block's first token (HasOffset false for the bare form).
type MediaKey struct {
	Identity  Identity
	Offset    int64
	HasOffset bool
}
