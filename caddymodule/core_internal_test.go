package caddymodule

import (
	"testing"

	"github.com/kvroute/kvroute/kv"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/subscriber"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
)

// TestCoreSettingsFollowNewestConfig: the event core survives reloads, and the settings in force
// are the newest running config's. A reload applies the new config's index bounds, pad ids and
// verifier; when Caddy rolls a failed reload back (the new config stops while the old one keeps
// running), the old config's settings are applied again; the old config stopping after a
// successful reload changes nothing.
func TestCoreSettingsFollowNewestConfig(t *testing.T) {
	nc, err := natsutil.Connect(natstest.Start(t).ClientURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st := &sharedNATS{nc: nc, logger: zap.NewNop()}
	ec, err := st.core(nil, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.stopCore)

	nemotron := &model.Model{Vision: true, TokenIDs: layout.TokenIDs{ImagePad: 18, VideoPad: 18}}
	verify := subscriber.StoredFunc(func(string, []uint32, []kv.MediaKey) {})
	old, next := &App{}, &App{}
	check := func(when string, perWorker int, imagePad, videoPad uint32, newest *App) {
		t.Helper()
		if got := ec.index.Limits().MaxBlocksPerWorker; got != perWorker {
			t.Errorf("%s: max_blocks_per_worker %d, want %d", when, got, perWorker)
		}
		if i, v := ec.sub.Pads(); i != imagePad || v != videoPad {
			t.Errorf("%s: pads %d/%d, want %d/%d", when, i, v, imagePad, videoPad)
		}
		if st.newest() != newest {
			t.Errorf("%s: newest config %p, want %p", when, st.newest(), newest)
		}
	}

	if err := st.activate(old, &coreSettings{index: &index.Config{MaxBlocksPerWorker: 5}}); err != nil {
		t.Fatal(err)
	}
	check("first config", 5, subscriber.DefaultImagePad, subscriber.DefaultVideoPad, old)
	if err := st.activate(next, &coreSettings{index: &index.Config{MaxBlocksPerWorker: 7}, model: nemotron, verify: verify}); err != nil {
		t.Fatal(err)
	}
	check("reloaded", 7, 18, 18, next)
	st.deactivate(next) // rolled back
	check("rolled back", 5, subscriber.DefaultImagePad, subscriber.DefaultVideoPad, old)

	if err := st.activate(next, &coreSettings{index: &index.Config{MaxBlocksPerWorker: 7}, model: nemotron, verify: verify}); err != nil {
		t.Fatal(err)
	}
	st.deactivate(old) // the old config stops after a successful reload
	check("old config stopped", 7, 18, 18, next)
	st.deactivate(next)
	check("all stopped", 7, 18, 18, nil)

	// a refused bound fails the start and leaves the settings in force alone
	if err := st.activate(old, &coreSettings{index: &index.Config{MaxBlocks: 1<<30 + 1}}); err == nil {
		t.Error("activate accepted max_blocks above 1<<30")
	}
	check("refused config", 7, 18, 18, nil)
}
