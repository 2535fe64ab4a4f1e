package normalize

import "github.com/kvroute/kvroute/kvevents/codec"

// SkipReason says why an event that decodes is not indexed (DESIGN.md §2, KV cache groups).
type SkipReason uint8

// The reasons, with the names of golden/vllm_hybrid_events.jsonl (String) and the events_total result
// each is counted under (Result).
const (
	// KindNotAdmitted: the event's own kv_cache_spec_kind is not an attention kind whose blocks line
	// up with the prompt (mamba, sliding_window, chunked_local_attention, unknown strings, …).
	KindNotAdmitted SkipReason = iota + 1
	// GroupKindNotAdmitted: no kind on the event; its group learned a kind that is not admitted.
	GroupKindNotAdmitted
	// GroupUnlearnedNonzero: no kind on the event, none learned for its group, and group_idx != 0.
	GroupUnlearnedNonzero
	// NonDenseBlockSpan: an admitted BlockStored whose token_ids are not block_size per block hash
	// (Mamba and sliding-window groups list only their resident blocks).
	NonDenseBlockSpan
	// BlockSizeMismatch: an admitted, dense BlockStored whose block_size is not the worker's.
	BlockSizeMismatch
)

var skipNames = [...]string{
	KindNotAdmitted:       "kind_not_admitted",
	GroupKindNotAdmitted:  "group_kind_not_admitted",
	GroupUnlearnedNonzero: "group_unlearned_nonzero",
	NonDenseBlockSpan:     "non_dense_block_span",
	BlockSizeMismatch:     "block_size_mismatch",
}

// String is the reason's name in golden/vllm_hybrid_events.jsonl and `kvroute events` ("" for 0).
func (r SkipReason) String() string {
	if int(r) < len(skipNames) {
		return skipNames[r]
	}
	return ""
}

// Result is the events_total result the reason is counted under: the three group reasons together
// as "non_attention_group", the others by their own name.
func (r SkipReason) Result() string {
	switch r {
	case KindNotAdmitted, GroupKindNotAdmitted, GroupUnlearnedNonzero:
		return "non_attention_group"
	}
	return r.String()
}

// AdmittedKind reports whether a kv_cache_spec_kind names a group whose blocks are the prompt's
// blocks: exactly "full_attention", "mla_attention" or "sink_full_attention" (case-sensitive). The
// rule is the one NVIDIA Dynamo and llm-d apply to hybrid models (llm-d-router #2362).
func AdmittedKind(kind string) bool {
	switch kind {
	case "full_attention", "mla_attention", "sink_full_attention":
		return true
	}
	return false
}

// maxLearnedGroups bounds the groups whose kind a Normalizer remembers (models have a handful of KV
// cache groups; group_idx comes from the wire). A group beyond the bound is treated as unlearned.
const maxLearnedGroups = 64

// learnedGroup is one KV cache group's kind, learned from its last BlockStored that carried one.
type learnedGroup struct {
	idx      int64
	admitted bool
}

// GroupFilter keeps the learned kinds of one worker and data-parallel rank's KV cache groups and
// applies the group rule to its events, in stream order. The zero value is ready; it is not safe for
// concurrent use. A Normalizer has one; kvevents/bridge uses one to find the main-attention group's
// block size.
type GroupFilter struct {
	learned []learnedGroup
}

// Admit applies the group rule to ev (BlockStored or BlockRemoved) and returns 0 when its blocks may
// be indexed. A BlockStored that carries both group_idx and a kind teaches its group that kind first,
// whether or not the event is then used; BlockRemoved never teaches (vLLM's has no kind), and a kind
// without group_idx teaches nothing.
//
// Rule (DESIGN.md §2; golden/README.md, vllm_hybrid_events.jsonl): an event with a kind is used iff the
// kind is admitted; with group_idx and no kind, iff its group learned an admitted kind, or learned
// none and group_idx is 0; with neither field (older vLLM, SGLang, Dynamo), always.
func (g *GroupFilter) Admit(ev *codec.Event) SkipReason {
	if ev.HasSpecKind {
		ok := AdmittedKind(ev.SpecKind)
		if ev.HasGroupIdx && ev.Type == codec.BlockStored {
			g.learn(ev.GroupIdx, ok)
		}
		if !ok {
			return KindNotAdmitted
		}
		return 0
	}
	if !ev.HasGroupIdx {
		return 0
	}
	for _, l := range g.learned {
		if l.idx == ev.GroupIdx {
			if l.admitted {
				return 0
			}
			return GroupKindNotAdmitted
		}
	}
	if ev.GroupIdx != 0 {
		return GroupUnlearnedNonzero
	}
	return 0
}

func (g *GroupFilter) learn(idx int64, admitted bool) {
	for i := range g.learned {
		if g.learned[i].idx == idx {
			g.learned[i].admitted = admitted
			return
		}
	}
	if len(g.learned) < maxLearnedGroups {
		g.learned = append(g.learned, learnedGroup{idx: idx, admitted: admitted})
	}
}

// Dense reports whether a BlockStored's token_ids are exactly block_size tokens per block hash, the
// event's own block_size (block_size > 0).
func Dense(ev *codec.Event) bool {
	bs := ev.BlockSize
	return bs > 0 && len(ev.TokenIDs)%bs == 0 && len(ev.TokenIDs)/bs == len(ev.BlockHashes)
}
