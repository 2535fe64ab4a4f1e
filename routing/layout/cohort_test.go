package layout_test

import (
	"strings"
	"testing"

	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
)

func TestCohortAgree(t *testing.T) {
	ex := mustParse(t, exampleContract)
	// The same contract written with 2 and 2.0 by two workers agrees.
	ex2 := mustParse(t, strings.Replace(exampleContract, `"fps": 2.0`, `"fps": 2`, 1))
	legacy := mustParse(t, strings.Replace(exampleContract, `"round_ties_even"`, `"legacy_ceil"`, 1))
	invalid := mustParse(t, strings.Replace(exampleContract, `"video_pruning_rate": 0.0`, `"video_pruning_rate": 0.3`, 1))
	otherIDs := mustParse(t, strings.NewReplacer(`"image_pad": 151655`, `"image_pad": 248056`).Replace(exampleContract))
	m := func(id string, c *layout.Contract, bs int) layout.Member {
		return layout.Member{WorkerID: id, Contract: c, BlockSize: bs}
	}
	cases := []struct {
		name    string
		members []layout.Member
		code    reason.Code
		bs      int
	}{
		{"agree", []layout.Member{m("a", ex, 16), m("b", ex2, 16), m("c", ex, 16)}, "", 16},
		{"single worker", []layout.Member{m("a", ex, 32)}, "", 32},
		{"no workers", nil, reason.ContractMissing, 0},
		{"one without contract", []layout.Member{m("a", ex, 16), m("b", nil, 16)}, reason.ContractMissing, 16},
		{"invalid contract", []layout.Member{m("a", ex, 16), m("b", invalid, 16)}, reason.ContractUnsupported, 16},
		{"different contracts", []layout.Member{m("a", ex, 16), m("b", legacy, 16)}, reason.ContractMismatch, 16},
		{"token ids differ from config.json", []layout.Member{m("a", otherIDs, 16), m("b", otherIDs, 16)}, reason.ContractMismatch, 16},
		{"block sizes differ", []layout.Member{m("a", ex, 16), m("b", ex, 32)}, reason.BlockSizeMismatch, 0},
		{"block sizes differ before a missing contract", []layout.Member{m("a", nil, 16), m("b", ex, 32)}, reason.BlockSizeMismatch, 0},
	}
	want := digest(t, ex)
	for _, c := range cases {
		co, err := layout.Agree(c.members, testIDs)
		if got := reason.CodeOf(err); got != c.code {
			t.Errorf("%s: code %q (err %v), want %q", c.name, got, err, c.code)
			continue
		}
		if co.BlockSize != c.bs {
			t.Errorf("%s: block size %d, want %d", c.name, co.BlockSize, c.bs)
		}
		if c.code != "" {
			if co.Contract != nil || co.Digest != "" {
				t.Errorf("%s: contract agreed despite %v", c.name, err)
			}
			if err.Error() == "" {
				t.Errorf("%s: empty message", c.name)
			}
			continue
		}
		if co.Contract == nil || co.Digest != want {
			t.Errorf("%s: cohort %+v, want digest %s", c.name, co, want)
		}
	}
}
