package normalize

import (
	"github.com/kvroute/kvroute/kv"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// IsIdentity reports whether s is a media identity string of DESIGN.md §2: 64 chars, the first 16
// lowercase hex digits, the last 48 '0' (kv.IsUUID).
func IsIdentity(s string) bool { return kv.IsUUID(s) }

// ParseIdentity returns the identity encoded by an identity string (kv.ParseUUID).
func ParseIdentity(s string) (kv.Identity, bool) { return kv.ParseUUID(s) }

// identityOf reads an identity from an extra_keys item: an identity string alone or as a pair's first
// element.
func identityOf(k codec.ExtraKey) (kv.Identity, bool) {
	if k.Kind != codec.KeyString && k.Kind != codec.KeyPair {
		return 0, false
	}
	return ParseIdentity(k.Str)
}
