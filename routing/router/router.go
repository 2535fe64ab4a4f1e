package router

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/wire"
	"github.com/kvroute/kvroute/routing/blocks"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/index"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/reason"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// DefaultMaxMedia is the default cap on media items per request (DESIGN.md §6).
const DefaultMaxMedia = 32

// Config tunes the router. The zero value is not usable; start from DefaultConfig.
type Config struct {
	// FrontendDecoding decodes media at the router so identities are content-stable (DESIGN.md
	// §1 step 3). Off, every media request falls back (frontend_decoding_off). Default: true.
	FrontendDecoding bool
	// MaxMedia caps the media items of one request (too_many_media above). Default: 32.
	MaxMedia int
	// MaxMessages and MaxParts cap the messages and the content parts (all messages together)
	// of one request, checked while the body is decoded (too_many_parts above; chat.Limits).
	// Default: 4096 and 8192.
	MaxMessages, MaxParts int
}

// DefaultConfig returns the DESIGN.md defaults.
func DefaultConfig() Config {
	return Config{FrontendDecoding: true, MaxMedia: DefaultMaxMedia,
		MaxMessages: chat.DefaultMaxMessages, MaxParts: chat.DefaultMaxParts}
}

// Hooks observe the router; every field may be nil.
type Hooks struct {
	// Stage receives the time spent in one stage of DESIGN.md §10 (parse, template, tokenize,
	// layout, hash, index, score; Media implementations report fetch and decode).
	Stage func(stage string, d time.Duration)
	// Verified receives the outcome of one run-time layout verification ("match" or "mismatch").
	Verified func(result string)
}

// Router computes routing decisions. It is safe for concurrent use.
type Router struct {
	cfg    Config
	model  *model.Model
	lmodel *layout.Model // nil: the model folder has no vision processor (no media support)
	// videoPlaceholder is the token run of a prompt placeholder that is not a vision token (Nemotron's
	// "<video>", several ids): a text prefix stops there too. Nil for Qwen.
	videoPlaceholder []uint32
	index            *index.Index
	sched            *scheduler.Scheduler
	media            Media
	hooks            Hooks
	log              *zap.Logger

	// mu protects cohorts.
	mu      sync.Mutex
	cohorts map[string]*cohortState

	verify *verifier
	// listed is set once SetWorkers gave the router the worker list: Route then leaves the
	// verifier's view of it to SetWorkers instead of updating it from every request's list.
	listed atomic.Bool
}

// SetWorkers gives the router the full worker list (static and live, workers marked down
// included) when it changes, for the layout verification of stored blocks (VerifyStored). From
// the first call on, Route no longer updates that view from Input.Workers, which may be a
// per-request subset (without workers marked down). Safe for concurrent use.
func (r *Router) SetWorkers(ws []Worker) {
	r.listed.Store(true)
	r.verify.setWorkers(ws)
}

// New returns a router. lmodel may be nil (text-only model); media may be nil (then media
// requests fall back with frontend_decoding_off).
func New(cfg Config, m *model.Model, lmodel *layout.Model, ix *index.Index, s *scheduler.Scheduler, media Media, hooks Hooks, log *zap.Logger) (*Router, error) {
	if m == nil || ix == nil || s == nil {
		return nil, errors.New("creating router: model, index and scheduler are required")
	}
	if cfg.MaxMedia <= 0 {
		cfg.MaxMedia = DefaultMaxMedia
	}
	if log == nil {
		log = zap.NewNop()
	}
	r := &Router{cfg: cfg, model: m, lmodel: lmodel, index: ix, sched: s, media: media, hooks: hooks, log: log,
		cohorts: map[string]*cohortState{}}
	if lmodel != nil && lmodel.Nemotron != nil && m.Tokenizer != nil {
		r.videoPlaceholder = m.Tokenizer.Encode(layout.NemotronVideoToken)
	}
	r.verify = newVerifier(r)
	return r, nil
}

// Index returns the router's KV index.
func (r *Router) Index() *index.Index { return r.index }

// Scheduler returns the router's scheduler.
func (r *Router) Scheduler() *scheduler.Scheduler { return r.sched }

// Input is one request to route.
type Input struct {
	// Path is the request path (e.g. /v1/chat/completions).
	Path string
	// Body is the exact request body; it is only read.
	Body []byte
	// Workers is the current worker list.
	Workers []Worker
	// Available reports whether a worker's upstream can take requests; nil means all can.
	Available func(w *Worker) bool
}

// Candidate is one scored worker, for logs, explain and the selection policy's next-best list.
type Candidate struct {
	WorkerID      string
	Endpoint      string
	OverlapBlocks int
	Cost          float64
	Available     bool
	// Terms are the parts of Cost under the scheduler's cost model; Load the worker's active
	// load they were computed from; Busy whether a busy threshold was exceeded.
	Terms scheduler.Terms
	Load  scheduler.Load
	Busy  bool
	// OverBalance and RecentRequests are the ttft model's load bound (scheduler.Scored).
	OverBalance    bool
	RecentRequests float64
}

// MediaSummary describes one media item of the routing view (explain's `media` entries).
type MediaSummary struct {
	Kind     string
	Identity string
	Frames   int
	Width    int
	Height   int
	GridTHW  [3]int
	Tokens   int
}

// Result is the routing outcome of one request.
type Result struct {
	// Model is the request's model field.
	Model string
	// Fallback is "" when routing was exact, else the reason code (DESIGN.md §8).
	Fallback reason.Code
	// Detail says, for logs, why the fallback happened.
	Detail string
	// TotalBlocks is the number of complete blocks scored; OverlapBlocks the chosen worker's
	// cached prefix of them.
	TotalBlocks, OverlapBlocks int
	// RequestTokens is the prompt length used for the load terms.
	RequestTokens int
	// Chosen is the picked worker (nil: no preference, the policy's fallback picks). Ranked holds
	// every candidate, best first.
	Chosen *Candidate
	Ranked []Candidate
	// Costs maps worker id to cost.
	Costs map[string]float64
	// CostModel is the scheduler's cost model (scheduler.CostTTFT or scheduler.CostLinear).
	CostModel string
	// Media summarizes the media items in prompt order (only when they were resolved).
	Media []MediaSummary
	// MediaItems is the number of media parts in the request (resolved or not).
	MediaItems int
	// Body is the body to forward: the client's bytes, with each media part's uuid spliced in
	// when identities are forwarded (Forwarded).
	Body      []byte
	Forwarded bool

	decision    scheduler.Decision
	hasDecision bool
}

// PrefillOn returns the request's uncached prompt tokens on the worker with id workerID (its own
// overlap; 0 without a decision), for scheduler.Handle.Move when the request goes to another
// worker than Chosen.
func (res *Result) PrefillOn(workerID string) int64 {
	if res == nil || !res.hasDecision {
		return 0
	}
	return res.decision.PrefillOn(index.WorkerKey{ID: workerID})
}

// Begin accounts the routed request's load on its worker (DESIGN.md §1 step 7). It returns nil
// when there is nothing to account (no decision).
func (r *Router) Begin(res *Result) *scheduler.Handle {
	if res == nil || !res.hasDecision {
		return nil
	}
	return r.sched.Begin(res.decision)
}

// stage reports one stage that began at start to the Stage hook and to the request's stage
// observer (WithStageObserver), if any.
func (r *Router) stage(ctx context.Context, name string, start time.Time) {
	d := time.Since(start)
	if r.hooks.Stage != nil {
		r.hooks.Stage(name, d)
	}
	observeStage(ctx, name, start, d)
}

// Route computes the decision for one request. The error is non-nil only for a request that must
// be answered with a 4xx (a *reason.Error with a client error code); every other problem is a
// fallback recorded in the Result.
func (r *Router) Route(ctx context.Context, in *Input) (*Result, error) {
	res := &Result{Body: in.Body}
	t0 := time.Now()
	req, err := chat.ParseRequestLimited(in.Body, chat.Limits{MaxMessages: r.cfg.MaxMessages, MaxParts: r.cfg.MaxParts})
	r.stage(ctx, "parse", t0)
	if errors.Is(err, chat.ErrTooManyParts) {
		return nil, reason.Wrap(reason.TooManyParts, err, "the request has too many messages or content parts")
	}
	if err != nil {
		return nil, reason.Wrap(reason.BodyInvalid, err, "request body is not a JSON object")
	}
	res.Model, res.MediaItems = req.Model, len(req.Media)
	kind := pathKind(in.Path)
	if kind != pathOther && req.SchemaErr == nil {
		// Client errors come first, whatever the routing outcome: a forwarded media part is
		// fetched by the worker, so a refused address is refused here on every path.
		if len(req.Media) > r.cfg.MaxMedia {
			return nil, reason.New(reason.TooManyMedia, "the request has %d media items; at most %d are allowed", len(req.Media), r.cfg.MaxMedia)
		}
		if err := r.checkMediaURLs(req); err != nil {
			return nil, err
		}
	}
	if !r.listed.Load() {
		r.verify.setWorkers(in.Workers)
	}
	workers, matched := workersFor(in.Workers, req.Model)
	if kind == pathOther {
		// No preference, as the handler forwards such a path (the policy's fallback picks): the
		// explain endpoint must not name a worker the handler would not choose.
		res.Fallback, res.Detail = reason.NotRouted, "path is not routed by KV overlap"
		return res, nil
	}
	if len(workers) == 0 {
		res.Fallback, res.Detail = reason.IndexUnavailable, "no registered workers"
		return res, nil
	}
	if !matched && req.Model != "" {
		// No record declares the model: nothing says these workers' caches or contracts are for
		// it, so route on load alone (the workers answer as they do for an unknown model).
		return r.loadOnly(ctx, res, workers, in, reason.IndexUnavailable, "no registered worker serves model "+strconv.Quote(req.Model))
	}
	if req.SchemaErr != nil {
		return r.loadOnly(ctx, res, workers, in, reason.TemplateError, req.SchemaErr.Error())
	}
	prompt, ids, err := r.promptTokens(ctx, req, kind)
	if err != nil {
		return r.loadOnly(ctx, res, workers, in, reason.TemplateError, err.Error())
	}

	bs := workers[0].BlockSize
	for _, w := range workers {
		if w.BlockSize != bs {
			return r.loadOnly(ctx, res, workers, in, reason.BlockSizeMismatch, "workers of the model disagree on block_size")
		}
	}
	if bs <= 0 {
		return r.loadOnly(ctx, res, workers, in, reason.IndexUnavailable, "worker has no block_size")
	}

	tokens := ids
	var spans []blocks.Span
	if len(req.Media) > 0 || req.HasAudio {
		exp, code, detail, err := r.mediaView(ctx, req, prompt, workers, res)
		if err != nil {
			return nil, err
		}
		if code != "" {
			res.Fallback, res.Detail = code, detail
			tokens = textPrefix(ids, r.model.TokenIDs, r.videoPlaceholder)
		} else {
			tokens, spans = exp.Tokens, exp.Spans
		}
	}

	t1 := time.Now()
	p, err := r.hashPrompt(workers, bs, blocks.SeedFor("", req.CacheSalt), tokens, spans)
	r.stage(ctx, "hash", t1)
	if err != nil {
		// Spans come from our own expansion; a failure here is a bug, not a client error.
		res.Fallback, res.Detail = reason.LayoutError, err.Error()
		tokens, spans = textPrefix(ids, r.model.TokenIDs, r.videoPlaceholder), nil
		if p, err = blocks.HashPrompt(blocks.Config{BlockSize: bs, ImagePad: r.model.TokenIDs.ImagePad, VideoPad: r.model.TokenIDs.VideoPad},
			blocks.SeedFor("", req.CacheSalt), tokens, nil); err != nil {
			return r.loadOnly(ctx, res, workers, in, reason.LayoutError, err.Error())
		}
	}
	hashes := p.Hashes()
	res.TotalBlocks = len(hashes)
	requestTokens := len(tokens)
	if res.Fallback != "" && len(ids) > requestTokens {
		requestTokens = len(ids)
	}
	if err := r.score(ctx, res, workers, in, hashes, requestTokens, bs); err != nil {
		return res, nil
	}
	if res.Fallback == "" && len(spans) > 0 {
		uuids := make([]string, len(req.Media))
		for i, s := range spans {
			uuids[i] = ForwardedUUID(s.Identity)
		}
		res.Body = chat.SpliceUUIDs(in.Body, req.Media, uuids)
		res.Forwarded = true
		r.verify.expect(res.Model, tokens, spans)
	}
	return res, nil
}

// hashPrompt hashes the routing view of tokens. SGLang workers key their cache by the prompt with
// each media span's pads replaced by its pad value (their KV events carry those ids), so a cohort
// of SGLang workers is hashed that way; vLLM workers by the DESIGN.md §5 rule.
func (r *Router) hashPrompt(workers []Worker, bs int, seed uint64, tokens []uint32, spans []blocks.Span) (*blocks.Prompt, error) {
	cfg := blocks.Config{BlockSize: bs, ImagePad: r.model.TokenIDs.ImagePad, VideoPad: r.model.TokenIDs.VideoPad}
	if len(spans) > 0 && workers[0].Engine == EngineSGLang {
		h, err := blocks.NewHasher(cfg)
		if err != nil {
			return nil, err
		}
		return h.PromptPadded(tokens, spans, seed)
	}
	return blocks.HashPrompt(cfg, seed, tokens, spans)
}

// ForwardedUUID is the uuid kvroute forwards for an identity: 16 lowercase hex digits and 48 zeros
// (DESIGN.md §1 step 6); vLLM uses it verbatim as the item's multimodal hash.
func ForwardedUUID(identity uint64) string { return wire.Identity(identity).UUID() }

// checkMediaURLs applies the network-free URL rules to every media part with a URL.
func (r *Router) checkMediaURLs(req *chat.Request) error {
	if r.media == nil {
		return nil
	}
	for _, p := range req.Media {
		if p.URL == "" {
			continue
		}
		if err := r.media.CheckURL(p.URL); err != nil {
			return err
		}
	}
	return nil
}

type pathType int

const (
	pathOther pathType = iota
	pathChat
	pathCompletions
)

func pathKind(p string) pathType {
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		return pathChat
	case strings.HasSuffix(p, "/completions"):
		return pathCompletions
	}
	return pathOther
}

func (r *Router) promptTokens(ctx context.Context, req *chat.Request, kind pathType) (string, []uint32, error) {
	var prompt string
	switch {
	case kind == pathChat && req.HasMessages:
		if r.model.Template == nil {
			return "", nil, model.ErrNoTemplate
		}
		t := time.Now()
		var err error
		prompt, err = r.model.Template.Render(req)
		r.stage(ctx, "template", t)
		if err != nil {
			return "", nil, err
		}
	case kind == pathCompletions && req.HasPrompt:
		prompt = req.Prompt
	default:
		return "", nil, errors.New("the request has no messages (chat) or string prompt (completions)")
	}
	t := time.Now()
	ids := r.model.Tokenizer.Encode(prompt)
	r.stage(ctx, "tokenize", t)
	return prompt, ids, nil
}

// textPrefix returns the prompt tokens before the first vision token or the first run of
// placeholder (when not empty): what can be routed exactly when the media cannot (DESIGN.md §1: a
// fallback routes on its text prefix).
func textPrefix(ids []uint32, t layout.TokenIDs, placeholder []uint32) []uint32 {
	for i, id := range ids {
		if id == t.VisionStart || id == t.ImagePad || id == t.VideoPad ||
			len(placeholder) > 0 && id == placeholder[0] && slices.Equal(ids[i:min(i+len(placeholder), len(ids))], placeholder) {
			return ids[:i:i]
		}
	}
	return ids
}

// loadOnly scores the workers on load alone (no prefix) and records the fallback.
func (r *Router) loadOnly(ctx context.Context, res *Result, workers []Worker, in *Input, code reason.Code, detail string) (*Result, error) {
	res.Fallback, res.Detail = code, detail
	bs := workers[0].BlockSize
	if bs <= 0 {
		bs = 1
	}
	_ = r.score(ctx, res, workers, in, nil, 0, bs)
	return res, nil
}

// score looks the hashes up, scores every worker and fills the decision fields of res.
func (r *Router) score(ctx context.Context, res *Result, workers []Worker, in *Input, hashes []wire.BlockHash, requestTokens, bs int) error {
	t := time.Now()
	overlap := map[string]int{}
	if len(hashes) > 0 {
		for _, o := range r.index.Match(context.Background(), hashes) {
			if o.Blocks > overlap[o.Worker.ID] {
				overlap[o.Worker.ID] = o.Blocks
			}
		}
	}
	r.stage(ctx, "index", t)
	t = time.Now()
	cands := make([]scheduler.Candidate, len(workers))
	for i := range workers {
		w := &workers[i]
		avail := in.Available == nil || in.Available(w)
		cands[i] = scheduler.Candidate{Worker: index.WorkerKey{ID: w.ID}, Endpoint: w.Endpoint, Available: avail, OverlapBlocks: overlap[w.ID]}
	}
	res.RequestTokens = requestTokens
	cfg := r.sched.Config()
	res.CostModel = cfg.Model()
	d, err := r.sched.Select(scheduler.Request{Tokens: requestTokens, BlockSize: bs}, cands)
	r.stage(ctx, "score", t)
	res.Costs = map[string]float64{}
	for _, c := range d.Candidates {
		res.Costs[c.Worker.ID] = c.Cost
		res.Ranked = append(res.Ranked, Candidate{WorkerID: c.Worker.ID, Endpoint: c.Endpoint, OverlapBlocks: c.OverlapBlocks,
			Cost: c.Cost, Available: c.Available, Terms: c.Terms, Load: c.Load, Busy: c.Busy,
			OverBalance: c.OverBalance, RecentRequests: c.RecentRequests})
	}
	if err != nil {
		if res.Fallback == "" {
			res.Detail = err.Error()
		}
		return err
	}
	sort.SliceStable(res.Ranked, func(i, j int) bool {
		a, b := res.Ranked[i], res.Ranked[j]
		if a.WorkerID == d.Worker.ID || b.WorkerID == d.Worker.ID {
			return a.WorkerID == d.Worker.ID
		}
		if a.Available != b.Available {
			return a.Available
		}
		return a.Cost < b.Cost || (a.Cost == b.Cost && a.WorkerID < b.WorkerID)
	})
	res.Chosen = &res.Ranked[0]
	res.OverlapBlocks = d.OverlapBlocks
	if math.IsNaN(d.Cost) {
		res.Detail = "cost is NaN"
	}
	res.decision, res.hasDecision = d, true
	return nil
}
