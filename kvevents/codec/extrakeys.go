package codec

import (
	"fmt"
	"strings"
)

// IdentityString is the identifier vLLM uses for a media item whose uuid kvroute forwarded: the
// identity as 16 lowercase hex digits followed by 48 '0' (DESIGN.md §2).
func IdentityString(identity uint64) string {
	return fmt.Sprintf("%016x", identity) + strings.Repeat("0", 48)
}

// ExtraKeysStyle selects which of vLLM's two extra_keys forms a media key takes (what
// internal/extrakeys.For writes for a simulated worker).
type ExtraKeysStyle uint8

const (
	// PairKeys writes [identifier, placeholder offset − block start] (vLLM ≥ PR #36708).
	PairKeys ExtraKeysStyle = iota + 1
	// BareKeys writes the identifier alone (older vLLM).
	BareKeys
)
