package router

import (
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/routing/blocks"
)

// maxExpectations bounds the forwarded identities awaiting verification.
const maxExpectations = 1024

// MediaKey is one media item named in a stored block's extra_keys: its identity and, in the
// current vLLM form `[identifier, placeholder_offset − block_start]`, the offset of the item's
// placeholder range relative to the block's first token.
type MediaKey struct {
	Identity  uint64
	Offset    int64
	HasOffset bool
}

// ParseForwardedUUID reads an identity from the uuid form kvroute forwards (16 lowercase hex digits
// and 48 zeros); ok is false for any other string.
func ParseForwardedUUID(s string) (uint64, bool) {
	if len(s) != 64 || s[16:] != strings.Repeat("0", 48) {
		return 0, false
	}
	for _, c := range s[:16] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s[:16], 16, 64)
	return v, err == nil
}

// expectation is the router's own expansion of one request that forwarded identities.
type expectation struct {
	model, digest string
	tokens        []uint32
	start, end    int // the identity's span in tokens
}

// verifier compares the first stored blocks that carry a forwarded identity with the router's own
// expansion (DESIGN.md §2.3 run-time check).
type verifier struct {
	r *Router

	// mu protects every field below.
	mu       sync.Mutex
	pending  map[uint64]*expectation
	order    []uint64
	mismatch map[string]string // model → contract digest that failed verification
}

func newVerifier(r *Router) *verifier {
	return &verifier{r: r, pending: map[uint64]*expectation{}, mismatch: map[string]string{}}
}

// expect records the expansion of a request whose identities were forwarded.
func (v *verifier) expect(model string, tokens []uint32, spans []blocks.Span) {
	v.r.mu.Lock()
	cs := v.r.cohorts[model]
	v.r.mu.Unlock()
	digest := ""
	if cs != nil {
		digest = cs.cohort.Digest
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range spans {
		if _, ok := v.pending[s.Identity]; ok {
			continue
		}
		v.pending[s.Identity] = &expectation{model: model, digest: digest, tokens: tokens, start: s.Start, end: s.End}
		v.order = append(v.order, s.Identity)
	}
	for len(v.order) > maxExpectations {
		delete(v.pending, v.order[0])
		v.order = v.order[1:]
	}
}

// mismatched reports whether verification failed for model under the given contract digest.
func (v *verifier) mismatched(model, digest string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	d, ok := v.mismatch[model]
	return ok && d == digest
}

// VerifyStored checks one stored block of a worker against the router's expansion: tokens are the
// block's worker tokens, keys the media items of its extra_keys. Blocks that carry no identity
// the router forwarded (or only bare identifiers without an offset) are ignored. A difference
// turns exact video routing off for the model until its contracts change (layout_mismatch).
func (r *Router) VerifyStored(workerID string, tokens []uint32, keys []MediaKey) {
	v := r.verify
	for _, k := range keys {
		if !k.HasOffset {
			continue
		}
		v.mu.Lock()
		e := v.pending[k.Identity]
		v.mu.Unlock()
		if e == nil {
			continue
		}
		// Compare only the positions inside the item's own span: the text around it may belong
		// to another request that sent the same clip.
		blockStart := int64(e.start) - k.Offset
		diff := -1
		for i := range tokens {
			p := blockStart + int64(i)
			if p < int64(e.start) || p >= int64(e.end) {
				continue
			}
			if tokens[i] != e.tokens[p] {
				diff = i
				break
			}
		}
		v.mu.Lock()
		delete(v.pending, k.Identity)
		if diff >= 0 {
			v.mismatch[e.model] = e.digest
		}
		v.mu.Unlock()
		result := "match"
		if diff >= 0 {
			result = "mismatch"
			fields := []zap.Field{zap.String("model", e.model), zap.String("worker_id", workerID),
				zap.String("identity", ForwardedUUID(k.Identity)[:16]), zap.Int64("block_start", blockStart), zap.Int("first_difference", diff)}
			if p := blockStart + int64(diff); p >= 0 && p < int64(len(e.tokens)) {
				fields = append(fields, zap.Uint32("router_token", e.tokens[blockStart+int64(diff)]), zap.Uint32("worker_token", tokens[diff]))
			}
			r.log.Warn("layout verification failed: exact video routing off for the model", fields...)
		}
		if r.hooks.Verified != nil {
			r.hooks.Verified(result)
		}
	}
}
