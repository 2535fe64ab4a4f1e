package normalize

import (
	"testing"

	"github.com/kvroute/kvroute/kvevents/codec"
)

// TestGroupFilterRule walks one stream through the readings the golden README states: the event's own
// kind decides and teaches its group; a kind-less event uses the learned kind, else group 0 only; a
// learned non-admitted kind beats the group-0 default; BlockRemoved and a kind without group_idx teach
// nothing; legacy events are used; groups beyond the bound stay unlearned.
func TestGroupFilterRule(t *testing.T) {
	st := func(g int64, hasG bool, kind string) *codec.Event {
		return &codec.Event{Type: codec.BlockStored, GroupIdx: g, HasGroupIdx: hasG, SpecKind: kind, HasSpecKind: kind != ""}
	}
	rm := func(g int64, kind string) *codec.Event {
		return &codec.Event{Type: codec.BlockRemoved, GroupIdx: g, HasGroupIdx: true, SpecKind: kind, HasSpecKind: kind != ""}
	}
	var g GroupFilter
	for i, c := range []struct {
		ev   *codec.Event
		want SkipReason
	}{
		{st(0, false, ""), 0},                            // legacy
		{st(0, true, ""), 0},                             // group 0, nothing learned
		{st(1, true, ""), GroupUnlearnedNonzero},         // group 1, nothing learned
		{rm(1, "full_attention"), 0},                     // a removal's own kind decides ...
		{st(1, true, ""), GroupUnlearnedNonzero},         // ... but teaches nothing
		{st(1, false, "mla_attention"), 0},               // kind without group_idx: decides, teaches nothing
		{st(1, true, ""), GroupUnlearnedNonzero},         //
		{st(1, true, "sink_full_attention"), 0},          // teaches group 1 an admitted kind
		{st(1, true, ""), 0},                             // learned admitted beats the group-0-only default
		{rm(1, ""), 0},                                   //
		{st(0, true, "mamba"), KindNotAdmitted},          // teaches group 0 mamba
		{st(0, true, ""), GroupKindNotAdmitted},          // learned beats the group-0 default
		{rm(0, ""), GroupKindNotAdmitted},                //
		{st(0, true, "full_attention"), 0},               // re-taught
		{rm(0, ""), 0},                                   //
		{st(2, true, "FULL_ATTENTION"), KindNotAdmitted}, // exact, case-sensitive strings
		{st(2, true, "full_attention "), KindNotAdmitted},
		{st(2, true, ""), GroupKindNotAdmitted},
	} {
		if got := g.Admit(c.ev); got != c.want {
			t.Errorf("step %d: %+v → %v, want %v", i, *c.ev, got, c.want)
		}
	}
	// The bound: groups past maxLearnedGroups are not remembered.
	var b GroupFilter
	for i := int64(0); i < maxLearnedGroups+5; i++ {
		b.Admit(st(i+10, true, "full_attention"))
	}
	if len(b.learned) != maxLearnedGroups || b.Admit(st(10+maxLearnedGroups+1, true, "")) != GroupUnlearnedNonzero || b.Admit(st(10, true, "")) != 0 {
		t.Errorf("bound: %d learned", len(b.learned))
	}
	for r, want := range map[SkipReason]string{KindNotAdmitted: "non_attention_group", GroupKindNotAdmitted: "non_attention_group",
		GroupUnlearnedNonzero: "non_attention_group", NonDenseBlockSpan: "non_dense_block_span", BlockSizeMismatch: "block_size_mismatch"} {
		if r.Result() != want {
			t.Errorf("%v.Result() = %q, want %q", r, r.Result(), want)
		}
	}
}
