package router

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/routing/apis"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/routing/chat"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// The Router and its configuration: what New builds once per model and config load and what
// lives as long as it does (index, scheduler, media port, cohorts, verifier). Routing one request
// is route.go; its input and outcome types are result.go.

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
	// APIs are the workers' settings for /v1/responses and /v1/messages (routing/apis.Options).
	APIs apis.Options
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
	// adapters remembers the LoRA adapters of earlier worker lists (adapter.go).
	adapters adapterMemory

	// conv converts /v1/responses and /v1/messages bodies (apis.go), set on first use.
	convOnce sync.Once
	conv     *apis.Converter

	// onHashes, when set (tests only), sees every request's block hashes before they are scored.
	onHashes func([]kv.BlockHash)
}

// SetWorkers gives the router the full worker list (static and live, workers marked down
// included) when it changes, for the layout verification of stored blocks (VerifyStored). From
// the first call on, Route no longer updates that view from Input.Workers, which may be a
// per-request subset (without workers marked down). Safe for concurrent use.
func (r *Router) SetWorkers(ws []Worker) {
	r.listed.Store(true)
	r.verify.setWorkers(ws)
	r.adapters.learn(ws)
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
