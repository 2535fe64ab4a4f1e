// Package normalize turns decoded KV events into index entries: for every stored block the engine's
// hash (kept only as the key for later removals), its parent's engine hash, and the LocalBlockHash the
// request side computes for the same tokens (DESIGN.md §2 extra_keys rules, §5 block rule through
// routing/blocks.Hasher.Block). See kvevents/codec for the package layout.
package normalize
