package sim

// Cache is the worker's prefix cache. Lookup returns how many leading prompt tokens are already
// cached (reported as usage.prompt_tokens_details.cached_tokens); Store records the prompt's
// blocks after prefill (where a block cache would publish BlockStored events). Implementations
// must be safe for concurrent use.
type Cache interface {
	Lookup(tokens []uint32) int
	Store(tokens []uint32)
}

// NoCache caches nothing: cached_tokens is always 0.
type NoCache struct{}

// Lookup implements Cache.
func (NoCache) Lookup([]uint32) int { return 0 }

// Store implements Cache.
func (NoCache) Store([]uint32) {}
