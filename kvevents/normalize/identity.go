package normalize

import (
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// IsIdentity reports whether s is a media identity string of DESIGN.md §2: 64 chars, the first 16
// lowercase hex digits, the last 48 '0' (wire.IsUUID).
func IsIdentity(s string) bool { return wire.IsUUID(s) }

// ParseIdentity returns the identity encoded by an identity string (wire.ParseUUID).
func ParseIdentity(s string) (wire.Identity, bool) { return wire.ParseUUID(s) }

// identityOf reads an identity from an extra_keys item: an identity string alone or as a pair's first
// element.
func identityOf(k codec.ExtraKey) (wire.Identity, bool) {
	if k.Kind != codec.KeyString && k.Kind != codec.KeyPair {
		return 0, false
	}
	return ParseIdentity(k.Str)
}
