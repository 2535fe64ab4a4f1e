package sim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/sim"
	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/normalize"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/router"
)

const modelDir = "../../testdata/golden/qwen3vl-test-model"

// fakeMedia answers every video URL with the facts of the 10 s 640×360 30 fps fixture and every
// image URL with a 640×480 image, under the identities given per URL.
type fakeMedia struct {
	identity map[string]kv.Identity
}

func (f *fakeMedia) Video(_ context.Context, url string, c *layout.Contract) (*router.VideoInfo, error) {
	idx, err := router.Sampler(c, 300, 30, 640, 360)
	if err != nil {
		return nil, err
	}
	return &router.VideoInfo{Identity: f.identity[url], Codec: "vp9", DecodedFrames: 300, ContainerFrames: 300,
		SourceFPS: 30, Width: 640, Height: 360, Indices: idx}, nil
}

func (f *fakeMedia) CheckURL(string) error { return nil }

func (f *fakeMedia) Image(_ context.Context, url string) (*router.ImageInfo, error) {
	return &router.ImageInfo{Identity: f.identity[url], Width: 640, Height: 480}, nil
}

// newFrontend returns a frontend over the test model; media may be nil (real fetch and decode).
func newFrontend(t *testing.T, media router.Media, oracle []uint32) *sim.Frontend {
	t.Helper()
	return newFrontendContract(t, media, oracle, sim.HubContract)
}

// newFrontendContract is newFrontend with another contract.
func newFrontendContract(t *testing.T, media router.Media, oracle []uint32, contract string) *sim.Frontend {
	t.Helper()
	m, lm := testkit.Models(t, modelDir)
	f, err := sim.NewFrontend(&sim.FrontendConfig{ModelDir: modelDir, Model: m, LayoutModel: lm, Media: media, OracleTokens: oracle, Contract: []byte(contract)})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// recorder keeps the batches a publisher publishes.
type recorder struct {
	mu   sync.Mutex
	msgs []sim.Message
}

func (r *recorder) add(m sim.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

func (r *recorder) all() []sim.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sim.Message(nil), r.msgs...)
}

// decodeAll decodes and normalizes batches as the router does (one normalizer, in order).
func decodeAll(t *testing.T, msgs []sim.Message) []normalize.Op {
	t.Helper()
	n, err := normalize.New(normalize.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var ops []normalize.Op
	for _, m := range msgs {
		b, err := codec.Decode(codec.VLLM, m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		res := n.Apply(b)
		if res.Skipped != 0 || b.Unknown != 0 || b.Malformed != 0 {
			t.Fatalf("batch %d: skipped %d (%v), unknown %d, malformed %d", m.Seq, res.Skipped, res.FirstErr, b.Unknown, b.Malformed)
		}
		ops = append(ops, res.Ops...)
	}
	return ops
}

// newRecorderServer serves s on a loopback test server and returns its URL.
func newRecorderServer(t *testing.T, s *sim.Server) string {
	t.Helper()
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		http.DefaultClient.CloseIdleConnections()
	})
	return ts.URL
}
