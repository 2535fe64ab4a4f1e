package router

import (
	"sync"

	"github.com/kvroute/kvroute/kv"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv/blocks"
)

// maxExpectations bounds the forwarded identities awaiting verification.
const maxExpectations = 1024

// expectation is the router's own expansion of one request that forwarded identities.
type expectation struct {
	model, digest string
	tokens        []uint32
	start, end    int // the identity's span in tokens
	// matched and failed say which outcomes were reported: each at most once per expectation.
	matched, failed bool
}

// verifyKey scopes an expectation to one model: the same clip sent to two models is laid out by
// each model's own contract.
type verifyKey struct {
	model    string
	identity kv.Identity
}

// verifier compares the first stored blocks that carry a forwarded identity with the router's own
// expansion (DESIGN.md §2.3 run-time check).
type verifier struct {
	r *Router

	// mu protects every field below.
	mu       sync.Mutex
	pending  map[verifyKey]*expectation
	order    []verifyKey
	mismatch map[string]string // model → contract digest that failed verification
	models   map[string]string // worker id → model, from the last worker list seen
}

func newVerifier(r *Router) *verifier {
	return &verifier{r: r, pending: map[verifyKey]*expectation{}, mismatch: map[string]string{}, models: map[string]string{}}
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
		k := verifyKey{model, s.Identity}
		if _, ok := v.pending[k]; ok {
			continue
		}
		v.pending[k] = &expectation{model: model, digest: digest, tokens: tokens, start: s.Start, end: s.End}
		v.order = append(v.order, k)
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

// setWorkers records which model each worker serves, so a stored block is checked against the
// expansion of its own worker's model.
func (v *verifier) setWorkers(ws []Worker) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.models) == len(ws) {
		same := true
		for _, w := range ws {
			if m, ok := v.models[w.ID]; !ok || m != w.Model {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	v.models = make(map[string]string, len(ws))
	for _, w := range ws {
		v.models[w.ID] = w.Model
	}
}

// VerifyStored checks one stored block of a worker against the router's expansion: tokens are the
// block's worker tokens, keys the media items of its extra_keys. Blocks that carry no identity
// the router forwarded to this worker's model (or only bare identifiers without an offset) are
// ignored. Every block of every forwarded item is compared while its expectation is kept (the
// last 1024 items); the first match and the first difference of an item are each reported once.
// A difference turns exact video routing off for the model until its contracts change
// (layout_mismatch).
func (r *Router) VerifyStored(workerID string, tokens []uint32, keys []kv.MediaKey) {
	v := r.verify
	for _, k := range keys {
		if !k.HasOffset {
			continue
		}
		v.mu.Lock()
		model, known := v.models[workerID]
		e := v.pending[verifyKey{model, k.Identity}]
		v.mu.Unlock()
		if !known || e == nil {
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
		result := ""
		v.mu.Lock()
		switch {
		case diff >= 0 && !e.failed:
			e.failed, result = true, "mismatch"
			v.mismatch[e.model] = e.digest
		case diff < 0 && !e.matched:
			e.matched, result = true, "match"
		}
		v.mu.Unlock()
		if result == "mismatch" {
			fields := []zap.Field{zap.String("model", e.model), zap.String("worker_id", workerID),
				zap.String("identity", k.Identity.Hex()), zap.Int64("block_start", blockStart), zap.Int("first_difference", diff)}
			if p := blockStart + int64(diff); p >= 0 && p < int64(len(e.tokens)) {
				fields = append(fields, zap.Uint32("router_token", e.tokens[p]), zap.Uint32("worker_token", tokens[diff]))
			}
			r.log.Warn("layout verification failed: exact video routing off for the model", fields...)
		}
		if result != "" && r.hooks.Verified != nil {
			r.hooks.Verified(result)
		}
	}
}
