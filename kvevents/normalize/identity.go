package normalize

import "github.com/kvroute/kvroute/kvevents/codec"

// IsIdentity reports whether s is a media identity string of DESIGN.md §2: 64 chars, the first 16
// lowercase hex digits, the last 48 '0' (vLLM's identifier for an item whose mm_hash kvroute or Dynamo
// forwarded as a uuid; Dynamo lib/kv-router extra_keys.rs).
func IsIdentity(s string) bool {
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

// ParseIdentity returns the identity encoded by an identity string (its first 16 hex digits).
func ParseIdentity(s string) (uint64, bool) {
	if !IsIdentity(s) {
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
	return v, true
}

// identityOf reads an identity from an extra_keys item: an identity string alone or as a pair's first
// element.
func identityOf(k codec.ExtraKey) (uint64, bool) {
	if k.Kind != codec.KeyString && k.Kind != codec.KeyPair {
		return 0, false
	}
	return ParseIdentity(k.Str)
}
