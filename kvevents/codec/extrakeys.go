package codec

// ExtraKeysStyle selects which of vLLM's two extra_keys forms a media key takes (what
// internal/extrakeys.For writes for a simulated worker).
type ExtraKeysStyle uint8

const (
	// PairKeys writes [identifier, placeholder offset − block start] (vLLM ≥ PR #36708).
	PairKeys ExtraKeysStyle = iota + 1
	// BareKeys writes the identifier alone (older vLLM).
	BareKeys
)
