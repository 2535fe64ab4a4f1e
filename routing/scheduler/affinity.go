package scheduler

import (
	"encoding/binary"
	"sort"

	"github.com/zeebo/xxh3"
)

// Affinity is the routing key of media the router could not decode (a codec not allowed, an
// audio part, any media fallback): the request still has a stable key, and its repeats should
// reach the worker whose engine cached the media, which no KV event shows the router.
type Affinity struct {
	// Key is the media's key: XXH3-128 of its encoded bytes, or of its URL when the bytes were
	// not fetched (routing/router, affinity.go).
	Key [16]byte
	// Tokens is the media's estimated prompt tokens: the prefill the rendezvous worker is
	// expected to skip. Select credits it to that worker as the `affinity` cost term.
	Tokens int
}

// rendezvousWeight is the highest-random-weight hash of (key, worker id) (Thaler and Ravishankar,
// "Using name-based mappings to increase hit rates", IEEE/ACM ToN 1998): XXH3-64 of the worker id
// seeded with the key's two halves folded. Every replica computes the same weights from the
// same key and ids, with no shared state.
func rendezvousWeight(key [16]byte, id string) uint64 {
	seed := binary.LittleEndian.Uint64(key[:8]) ^ binary.LittleEndian.Uint64(key[8:])*0x9E3779B97F4A7C15
	return xxh3.HashStringSeed(id, seed)
}

// RendezvousOrder returns the indices of ids in rendezvous order for key: highest weight first,
// ties (equal 64-bit weights) by id. The order of a worker pair does not depend on the other ids
// or on the order of ids, so a worker that leaves moves only the keys it ranked first.
func RendezvousOrder(key [16]byte, ids []string) []int {
	w := make([]uint64, len(ids))
	order := make([]int, len(ids))
	for i, id := range ids {
		w[i], order[i] = rendezvousWeight(key, id), i
	}
	sort.SliceStable(order, func(a, b int) bool {
		i, j := order[a], order[b]
		if w[i] != w[j] {
			return w[i] > w[j]
		}
		return ids[i] < ids[j]
	})
	return order
}

// applyAffinity credits the request's affinity to one candidate: the first in the key's
// rendezvous order among the available candidates that are neither busy nor over the load
// bound (the first available one when every available candidate is). The credit is the
// affinity's Tokens in the model's units (prefill tokens for ttft; prefill blocks ·
// prefill_load_scale for linear), recorded as Terms.Affinity and subtracted from the cost: the
// media's prefill, which every other worker would do, is what that worker is expected to skip.
// It returns the index of the credited candidate, -1 when there is none.
func (s *Scheduler) applyAffinity(a *Affinity, blockSize int, scored []Scored) int {
	if a == nil || a.Tokens <= 0 {
		return -1
	}
	ids := make([]string, len(scored))
	for i := range scored {
		ids[i] = scored[i].Worker.ID
	}
	pick := -1
	for _, i := range RendezvousOrder(a.Key, ids) {
		sc := &scored[i]
		if !sc.Available {
			continue
		}
		if pick < 0 {
			pick = i // fallback: every available candidate is busy or over the bound
		}
		if sc.overInFlight {
			sc.OverBalance = true // the request would ride its affinity onto a worker over the bound
		}
		if !sc.Busy && !sc.OverBalance {
			pick = i
			break
		}
	}
	if pick < 0 {
		return -1
	}
	credit := float64(a.Tokens)
	if s.cfg.Model() == CostLinear {
		credit = s.cfg.PrefillLoadScale * float64(a.Tokens) / float64(blockSize)
	}
	scored[pick].Terms.Affinity = credit
	scored[pick].Cost -= credit
	return pick
}
