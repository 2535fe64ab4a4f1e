package router

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/internal/goldens"
	"github.com/kvroute/kvroute/kv/blocks"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/scheduler"
)

const modelDir = "../../testdata/golden/qwen3vl-test-model"

// hubContract is the contract of DESIGN.md §2.3 (current vLLM, hub pixel budgets).
const hubContract = layout.HubContractJSON

// fakeMedia returns fixed clip facts per URL: the 10 s 640×360 VP9 fixture's (300 frames at
// 30 fps) under every URL, with the hf_fps indices of golden layout_0000.
type fakeMedia struct {
	identity  map[string]kv.Identity
	container int
	err       map[string]error
}

func (f *fakeMedia) Video(_ context.Context, url string, c *layout.Contract) (*VideoInfo, error) {
	if err := f.err[url]; err != nil {
		return nil, err
	}
	idx, err := Sampler(c, 300, 30, 640, 360)
	if err != nil {
		return nil, err
	}
	cf := f.container
	if cf == 0 {
		cf = 300
	}
	return &VideoInfo{Identity: f.identity[url], Codec: "vp9", DecodedFrames: 300, ContainerFrames: cf, SourceFPS: 30, Width: 640, Height: 360, Indices: idx}, nil
}

func (f *fakeMedia) CheckURL(url string) error {
	if strings.HasPrefix(url, "http://169.254.") {
		return reason.New(reason.MediaURLBlocked, "link-local")
	}
	return nil
}

func (f *fakeMedia) Image(_ context.Context, url string) (*ImageInfo, error) {
	return &ImageInfo{Identity: f.identity[url], Width: 640, Height: 480}, nil
}

var testModel = sync.OnceValues(func() (*model.Model, error) { return model.Load(modelDir) })

func newTestRouter(t testing.TB, media Media) *Router {
	t.Helper()
	m, err := testModel()
	if err != nil {
		t.Fatal(err)
	}
	lm, err := layout.LoadModel(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := index.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(nil, rand.NewPCG(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(DefaultConfig(), m, lm, ix, s, media, Hooks{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testWorkers(contracts ...string) []Worker {
	ws := []Worker{{ID: "sim-a", Endpoint: "127.0.0.1:9001", Model: "qwen", Engine: kv.EngineVLLM, BlockSize: 16},
		{ID: "sim-b", Endpoint: "127.0.0.1:9002", Model: "qwen", Engine: kv.EngineVLLM, BlockSize: 16}}
	for i := range ws {
		c := hubContract
		if i < len(contracts) {
			c = contracts[i]
		}
		if c != "" {
			ws[i].Contract = json.RawMessage(c)
		}
	}
	return ws
}

// goldenIDs reads the ids of one tokens.jsonl record.
func goldenIDs(t *testing.T, id string) []uint32 {
	return goldens.TokenIDs(t, "../../testdata/golden/tokens.jsonl", id)
}

const chat000 = `{"model":"qwen","messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"https://example.com/clip.mp4"}},{"type":"text","text":"Describe this video."}]}],"add_generation_prompt":true}`

// TestVideoExpansionEqualsGolden routes golden chat case chat_000 with the clip facts of
// layout_0000 and checks the router's worker-visible tokens against the golden expansion
// tok_expanded_ex1_new_wrapper_kept (tokens.jsonl), id for id.
func TestVideoExpansionEqualsGolden(t *testing.T) {
	const ident = 0x0123456789abcdef
	r := newTestRouter(t, &fakeMedia{identity: map[string]kv.Identity{"https://example.com/clip.mp4": ident}})
	res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: []byte(chat000), Workers: testWorkers()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback != "" {
		t.Fatalf("fallback %s: %s", res.Fallback, res.Detail)
	}
	want := goldenIDs(t, "tok_expanded_ex1_new_wrapper_kept")
	e := r.verify.pending[verifyKey{"qwen", ident}]
	if e == nil {
		t.Fatal("no expectation recorded for the forwarded identity")
	}
	if len(e.tokens) != len(want) {
		t.Fatalf("expansion has %d tokens, golden %d", len(e.tokens), len(want))
	}
	for i := range want {
		if e.tokens[i] != want[i] {
			t.Fatalf("token %d = %d, golden %d", i, e.tokens[i], want[i])
		}
	}
	if res.TotalBlocks != len(want)/16 {
		t.Fatalf("total_blocks %d, want %d", res.TotalBlocks, len(want)/16)
	}
	if !res.Forwarded {
		t.Fatal("identity not forwarded")
	}
	uuid := `"uuid":"0123456789abcdef` + strings.Repeat("0", 48) + `"`
	if !strings.Contains(string(res.Body), uuid) {
		t.Fatalf("body lacks the spliced uuid: %s", res.Body)
	}
	if got := strings.Replace(string(res.Body), ","+uuid, "", 1); got != chat000 {
		t.Fatalf("splice changed other bytes:\n%s\n%s", got, chat000)
	}
	if len(res.Media) != 1 || res.Media[0].GridTHW != [3]int{10, 22, 40} || res.Media[0].Frames != 20 || res.Media[0].Identity != "0123456789abcdef" {
		t.Fatalf("media summary %+v", res.Media)
	}
}

// TestWarmRepeatGoesToHolder stores the request's own blocks for one worker and checks that the
// repeat goes there with full overlap; a different clip gets no video credit.
func TestWarmRepeatGoesToHolder(t *testing.T) {
	fm := &fakeMedia{identity: map[string]kv.Identity{"https://example.com/clip.mp4": 11, "https://example.com/other.webm": 22}}
	r := newTestRouter(t, fm)
	in := &Input{Path: "/v1/chat/completions", Body: []byte(chat000), Workers: testWorkers()}
	cold, err := r.Route(context.Background(), in)
	if err != nil || cold.Fallback != "" {
		t.Fatalf("cold: %v %v", err, cold.Fallback)
	}
	if cold.OverlapBlocks != 0 {
		t.Fatalf("cold overlap %d", cold.OverlapBlocks)
	}
	// What sim-b's KV events would index: the expansion hashed with the identity.
	e := r.verify.pending[verifyKey{"qwen", 11}]
	p, err := blocks.HashPrompt(blocks.Config{BlockSize: 16, ImagePad: 151655, VideoPad: 151656}, blocks.BaseSeed, e.tokens,
		[]blocks.Span{{Start: e.start, End: e.end, Identity: 11, Kind: blocks.Video}})
	if err != nil {
		t.Fatal(err)
	}
	var sb []index.StoredBlock
	for i, h := range p.Hashes() {
		sb = append(sb, index.StoredBlock{EngineHash: kv.EngineHash(1000 + i), Parent: kv.EngineHash(999 + i), HasParent: i > 0, LocalHash: h})
	}
	if err := r.index.Store(context.Background(), index.WorkerKey{ID: "sim-b"}, sb); err != nil {
		t.Fatal(err)
	}
	warm, err := r.Route(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if warm.Chosen == nil || warm.Chosen.WorkerID != "sim-b" || warm.OverlapBlocks != warm.TotalBlocks || warm.TotalBlocks != 143 {
		t.Fatalf("warm: chosen %+v overlap %d/%d", warm.Chosen, warm.OverlapBlocks, warm.TotalBlocks)
	}
	other, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Workers: testWorkers(),
		Body: []byte(strings.Replace(chat000, "clip.mp4", "other.webm", 1))})
	if err != nil {
		t.Fatal(err)
	}
	// The prompt starts "<|im_start|>user\n<|vision_start|>" then the video: the first block
	// already holds timestamp and pad tokens, so a different clip shares no block.
	if other.OverlapBlocks != 0 {
		t.Fatalf("different clip credited %d blocks", other.OverlapBlocks)
	}
}

func TestFallbacks(t *testing.T) {
	url := "https://example.com/clip.mp4"
	fm := &fakeMedia{identity: map[string]kv.Identity{url: 7}, err: map[string]error{
		"https://example.com/blocked.webm": reason.New(reason.MediaURLBlocked, "blocked"),
		"https://example.com/h264.mp4":     reason.New(reason.UnsupportedCodec, "h264"),
	}}
	other := strings.Replace(hubContract, `"fps": 2.0`, `"fps": 1.0`, 1)
	cases := []struct {
		name     string
		body     string
		workers  []Worker
		fallback reason.Code
		errCode  reason.Code
	}{
		{"client uuid", strings.Replace(chat000, `{"url":"https://example.com/clip.mp4"}`, `{"url":"https://example.com/clip.mp4"},"uuid":"abc"`, 1), nil, reason.ClientUUID, ""},
		{"mm_processor_kwargs", strings.Replace(chat000, `"add_generation_prompt":true`, `"mm_processor_kwargs":{"fps":1}`, 1), nil, reason.MMProcessorKwargs, ""},
		{"audio", strings.Replace(chat000, `{"type":"text","text":"Describe this video."}`, `{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}`, 1), nil, reason.AudioPresent, ""},
		{"adjacent videos", strings.Replace(chat000, `{"type":"text"`, `{"type":"video_url","video_url":{"url":"https://example.com/clip.mp4"}},{"type":"text"`, 1), nil, reason.AdjacentVideos, ""},
		{"contract mismatch", chat000, testWorkers(hubContract, other), reason.ContractMismatch, ""},
		{"contract missing", chat000, testWorkers(hubContract, ""), reason.ContractMissing, ""},
		{"unsupported codec", strings.Replace(chat000, "clip.mp4", "h264.mp4", 1), nil, reason.UnsupportedCodec, ""},
		{"blocked url", strings.Replace(chat000, "clip.mp4", "blocked.webm", 1), nil, "", reason.MediaURLBlocked},
		// A fallback forwards the part to a worker that fetches it: the URL rules apply anyway.
		{"blocked url with client uuid", strings.Replace(chat000, `{"url":"https://example.com/clip.mp4"}`, `{"url":"http://169.254.169.254/x"},"uuid":"abc"`, 1), nil, "", reason.MediaURLBlocked},
		{"bad json", `{"messages": [`, nil, "", reason.BodyInvalid},
		{"schema", `{"messages": 5}`, nil, reason.TemplateError, ""},
		{"unknown model", strings.Replace(chat000, `"model":"qwen"`, `"model":"nope"`, 1), nil, reason.IndexUnavailable, ""},
		{"unknown model, blocked url", strings.Replace(strings.Replace(chat000, `"model":"qwen"`, `"model":"nope"`, 1), "https://example.com/clip.mp4", "http://169.254.169.254/x", 1), nil, "", reason.MediaURLBlocked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRouter(t, fm)
			ws := tc.workers
			if ws == nil {
				ws = testWorkers()
			}
			res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: []byte(tc.body), Workers: ws})
			if tc.errCode != "" {
				if reason.CodeOf(err) != tc.errCode {
					t.Fatalf("error %v, want code %s", err, tc.errCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Fallback != tc.fallback {
				t.Fatalf("fallback %q (%s), want %q", res.Fallback, res.Detail, tc.fallback)
			}
			if res.Forwarded || string(res.Body) != tc.body {
				t.Fatal("a fallback must forward the body unchanged")
			}
			if res.Chosen == nil {
				t.Fatal("a fallback still picks a worker")
			}
		})
	}
}

func TestFrameCountMismatch(t *testing.T) {
	container := strings.Replace(hubContract, `"frame_count_source": "decoded"`, `"frame_count_source": "container"`, 1)
	r := newTestRouter(t, &fakeMedia{identity: map[string]kv.Identity{"https://example.com/clip.mp4": 3}, container: 310})
	res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: []byte(chat000), Workers: testWorkers(container, container)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Fallback != reason.FrameCountMismatch {
		t.Fatalf("fallback %q", res.Fallback)
	}
	// The text prefix "<|im_start|>user\n" is shorter than one block.
	if res.TotalBlocks != 0 {
		t.Fatalf("text prefix blocks %d", res.TotalBlocks)
	}
}

// TestLayoutVerification feeds the router a stored block that carries the forwarded identity:
// the router's own tokens verify; one changed token turns exact video routing off.
func TestLayoutVerification(t *testing.T) {
	const ident = 42
	r := newTestRouter(t, &fakeMedia{identity: map[string]kv.Identity{"https://example.com/clip.mp4": ident}})
	var results []string
	r.hooks.Verified = func(s string) { results = append(results, s) }
	in := &Input{Path: "/v1/chat/completions", Body: []byte(chat000), Workers: testWorkers()}
	if _, err := r.Route(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	e := r.verify.pending[verifyKey{"qwen", ident}]
	// Block 1 (tokens 16..31) overlaps the video span, which starts at e.start.
	blk := append([]uint32(nil), e.tokens[16:32]...)
	r.VerifyStored("sim-a", blk, []kv.MediaKey{{Identity: ident, Offset: int64(e.start - 16), HasOffset: true}})
	if len(results) != 1 || results[0] != "match" {
		t.Fatalf("results %v", results)
	}
	res, _ := r.Route(context.Background(), in)
	if res.Fallback != "" {
		t.Fatalf("still exact after a match: %q", res.Fallback)
	}
	blk[5]++ // a pad token the worker laid out differently
	r.VerifyStored("sim-a", blk, []kv.MediaKey{{Identity: ident, Offset: int64(e.start - 16), HasOffset: true}})
	if len(results) != 2 || results[1] != "mismatch" {
		t.Fatalf("results %v", results)
	}
	res, _ = r.Route(context.Background(), in)
	if res.Fallback != reason.LayoutMismatch {
		t.Fatalf("fallback %q after a mismatch", res.Fallback)
	}
	ag := r.Agreements(testWorkers())
	if len(ag) != 1 || ag[0].Agreed || ag[0].Reason != reason.LayoutMismatch {
		t.Fatalf("agreements %+v", ag)
	}
}

// TestLayoutVerificationLaterBlockAndModelScope: a difference in a later block of the video still
// turns exact routing off, and only for the model of the worker that stored it.
func TestLayoutVerificationLaterBlockAndModelScope(t *testing.T) {
	const ident = 77
	r := newTestRouter(t, &fakeMedia{identity: map[string]kv.Identity{"https://example.com/clip.mp4": ident}})
	var results []string
	r.hooks.Verified = func(s string) { results = append(results, s) }
	ws := append(testWorkers(), Worker{ID: "other-1", Endpoint: "127.0.0.1:9003", Model: "other", Engine: kv.EngineVLLM, BlockSize: 16,
		Contract: json.RawMessage(hubContract)})
	in := &Input{Path: "/v1/chat/completions", Body: []byte(chat000), Workers: ws}
	if res, err := r.Route(context.Background(), in); err != nil || res.Fallback != "" {
		t.Fatalf("route: %v %+v", err, res)
	}
	e := r.verify.pending[verifyKey{"qwen", ident}]
	block := func(i int) []uint32 { return append([]uint32(nil), e.tokens[16*i:16*i+16]...) }
	key := func(i int) []kv.MediaKey {
		return []kv.MediaKey{{Identity: ident, Offset: int64(e.start - 16*i), HasOffset: true}}
	}
	r.VerifyStored("sim-a", block(1), key(1))
	r.VerifyStored("sim-a", block(2), key(2))
	// A worker of another model stores a different block 20 for the same clip: not our model.
	bad := block(20)
	bad[3]++
	r.VerifyStored("other-1", bad, key(20))
	if len(results) != 1 || results[0] != "match" {
		t.Fatalf("results %v", results)
	}
	if res, _ := r.Route(context.Background(), in); res.Fallback != "" {
		t.Fatalf("a worker of another model changed this model's routing: %q", res.Fallback)
	}
	// The model's own worker differs at block 20, long after block 1 matched.
	r.VerifyStored("sim-b", bad, key(20))
	if len(results) != 2 || results[1] != "mismatch" {
		t.Fatalf("results %v", results)
	}
	if res, _ := r.Route(context.Background(), in); res.Fallback != reason.LayoutMismatch {
		t.Fatalf("fallback %q", res.Fallback)
	}
}

// TestSGLangWorkersUsePaddedView: a cohort of SGLang workers that take forwarded mm_hashes is
// credited by SGLang's own cache keys (pads replaced by pad values, plain hashes); without the
// feature, media requests fall back.
func TestSGLangWorkersUsePaddedView(t *testing.T) {
	const ident = 0xfeed
	r := newTestRouter(t, &fakeMedia{identity: map[string]kv.Identity{"https://example.com/clip.mp4": ident}})
	ws := testWorkers()
	for i := range ws {
		ws[i].Engine = kv.EngineSGLang
	}
	res, err := r.Route(context.Background(), &Input{Path: "/v1/chat/completions", Body: []byte(chat000), Workers: ws})
	if err != nil || res.Fallback != reason.EngineNoMMHashes {
		t.Fatalf("without mm_hashes: %v %q", err, res.Fallback)
	}
	for i := range ws {
		ws[i].Features = []string{kv.FeatureMMHashes}
	}
	in := &Input{Path: "/v1/chat/completions", Body: []byte(chat000), Workers: ws}
	if res, err = r.Route(context.Background(), in); err != nil || res.Fallback != "" {
		t.Fatalf("with mm_hashes: %v %q", err, res.Fallback)
	}
	e := r.verify.pending[verifyKey{"qwen", ident}]
	// What an SGLang worker's events carry: the padded ids, hashed plain.
	padded := append([]uint32(nil), e.tokens...)
	for i := e.start; i < e.end; i++ {
		if padded[i] == 151656 {
			padded[i] = blocks.PadValue(ident)
		}
	}
	var sb []index.StoredBlock
	for i := 0; i+16 <= len(padded); i += 16 {
		sb = append(sb, index.StoredBlock{EngineHash: kv.EngineHash(5000 + i), Parent: kv.EngineHash(5000 + i - 16), HasParent: i > 0,
			LocalHash: blocks.HashTokens(padded[i:i+16], blocks.BaseSeed)})
	}
	if err := r.index.Store(context.Background(), index.WorkerKey{ID: "sim-a"}, sb); err != nil {
		t.Fatal(err)
	}
	if res, err = r.Route(context.Background(), in); err != nil || res.Chosen.WorkerID != "sim-a" || res.OverlapBlocks != res.TotalBlocks {
		t.Fatalf("warm: %v chosen %+v overlap %d/%d", err, res.Chosen, res.OverlapBlocks, res.TotalBlocks)
	}
}
