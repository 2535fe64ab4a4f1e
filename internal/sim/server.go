package sim

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvroute/kvroute/routing/apis"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
	"github.com/kvroute/kvroute/kvevents/codec"
)

// Config configures a simulated worker; nil means DefaultConfig.
type Config struct {
	// WorkerID is the registry worker id and is reported in system_fingerprint. Default: "sim".
	WorkerID string
	// Model is the served model name. Default: "kvroute-sim".
	Model string
	// BlockSize is the KV block size in tokens. Default: 16.
	BlockSize int
	// PrefillDelay is waited before the first token. Default: 0.
	PrefillDelay time.Duration
	// TokenDelay is waited before each further token (decode time per output token). Default: 0.
	TokenDelay time.Duration
	// PrefillPerToken, when > 0, is the prefill time per uncached prompt token, added to
	// PrefillDelay; prefills then run one at a time per worker, in arrival order (see engine).
	// Default: 0 (prefill takes PrefillDelay and never waits for another).
	PrefillPerToken time.Duration
	// MaxRunning, when > 0, bounds the sequences running at once (vLLM's max_num_seqs); requests
	// beyond it wait, in arrival order, for a running one to finish. Default: 0 (unbounded).
	MaxRunning int
	// MaxTokens is the completion length when the request sets none. Default: 8. Requests may ask
	// for at most 4096.
	MaxTokens int
	// MaxBodySize caps the request body. Default: 256 MiB.
	MaxBodySize int64
	// Frontend, when set, makes the simulator behave like a vLLM worker with prefix caching: it
	// computes the worker-visible prompt itself (model, template, its own media decode and
	// layout), keeps a block cache (Blocks) and publishes KV events (Events). Without it the
	// simulator counts words (Tokenizer) and asks Cache for cached_tokens.
	Frontend *Frontend
	// Blocks is the block cache used with Frontend. Default: NewBlockCache with BlockSize.
	Blocks *BlockCache
	// Events publishes the block cache's KV events; nil publishes nothing.
	Events *Publisher
	// Contract is the contract JSON published in the registry record. Default: the Frontend's.
	Contract json.RawMessage
	// Features are the worker features published in the registry record.
	Features []string
	// Tokenizer counts prompt tokens without a Frontend. Default: WordTokenizer.
	Tokenizer Tokenizer
	// Cache answers cached_tokens without a Frontend. Default: NoCache.
	Cache Cache
	// LoRAModules are the LoRA adapters served from the start (vLLM's --lora-modules; lora.go).
	LoRAModules []LoRAModule
	// Logger receives request errors. Default: no-op.
	Logger *zap.Logger
	// APIs are the vLLM settings of the agent APIs (/v1/messages conversion). Default: vLLM's.
	APIs apis.Options
	// OnRequest, if set, is called when a chat request's body has been read.
	OnRequest func(RequestInfo)
	// OnDone, if set, is called when a chat request ends (completed or cancelled by the client).
	OnDone func(RequestInfo, DoneInfo)
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{WorkerID: "sim", Model: "kvroute-sim", BlockSize: 16, MaxTokens: 8, MaxBodySize: 256 << 20,
		Tokenizer: WordTokenizer{}, Cache: NoCache{}}
}

// RequestInfo describes one received chat request (for tests and logs).
type RequestInfo struct {
	RequestID     string
	Path          string
	ContentLength int64  // the Content-Length header as received (-1 when absent)
	BodyLen       int    // bytes actually read
	BodySHA256    string // hex SHA-256 of the body
	Stream        bool
	Received      time.Time
}

// DoneInfo says how a request ended.
type DoneInfo struct {
	Canceled bool // the client went away before the response was complete
	At       time.Time
	Tokens   int // completion tokens sent
}

// Server is one simulated worker.
type Server struct {
	cfg      Config
	requests atomic.Int64
	active   atomic.Int64
	started  time.Time
	engine   *engine
	waiting  atomic.Int64
	loras    *loras
	store    responseStore
}

// New returns a Server; cfg may be nil.
func New(cfg *Config) *Server {
	d := DefaultConfig()
	c := *d
	if cfg != nil {
		c = *cfg
		c.WorkerID = cmp.Or(c.WorkerID, d.WorkerID)
		c.Model = cmp.Or(c.Model, d.Model)
		defaults.Positive(&c.BlockSize, d.BlockSize)
		c.PrefillPerToken, c.MaxRunning = max(c.PrefillPerToken, 0), max(c.MaxRunning, 0)
		defaults.Positive(&c.MaxTokens, d.MaxTokens)
		defaults.Positive(&c.MaxBodySize, d.MaxBodySize)
		if c.Tokenizer == nil {
			c.Tokenizer = d.Tokenizer
		}
		if c.Cache == nil {
			c.Cache = d.Cache
		}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Frontend != nil {
		if c.Blocks == nil {
			// The defaults and a positive block size cannot fail.
			c.Blocks, _ = NewBlockCache(&BlockCacheConfig{BlockSize: c.BlockSize})
		}
		c.BlockSize = c.Blocks.Config().BlockSize
		if c.Contract == nil {
			c.Contract = c.Frontend.ContractJSON()
		}
	}
	ls, err := newLoras(c.LoRAModules)
	if err != nil {
		c.Logger.Error("LoRA modules: serving none", zap.Error(err))
		ls, _ = newLoras(nil)
	}
	return &Server{cfg: c, started: time.Now(), engine: newEngine(&c), loras: ls}
}

// Config returns the effective configuration.
func (s *Server) Config() Config { return s.cfg }

// Requests returns how many chat requests were received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Active returns how many chat requests are in flight.
func (s *Server) Active() int64 { return s.active.Load() }

// Waiting returns how many chat requests wait for a running slot (MaxRunning).
func (s *Server) Waiting() int64 { return s.waiting.Load() }

// Handler returns the worker's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("POST /v1/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("POST /v1/load_lora_adapter", s.handleLoadLoRA)
	mux.HandleFunc("POST /v1/unload_lora_adapter", s.handleUnloadLoRA)
	mux.HandleFunc("POST /v1/responses", s.handleResponses)
	mux.HandleFunc("GET /v1/responses/{id}", s.handleResponseGet)
	mux.HandleFunc("DELETE /v1/responses/{id}", s.handleResponseDelete)
	mux.HandleFunc("POST /v1/responses/{id}/cancel", s.handleResponseCancel)
	mux.HandleFunc("POST /v1/messages", s.handleMessages)
	mux.HandleFunc("POST /v1/messages/count_tokens", s.handleCountTokens)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /reset_prefix_cache", s.handleReset)
	return mux
}

// handleReset empties the block cache and publishes AllBlocksCleared, as vLLM's
// /reset_prefix_cache does.
func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Blocks != nil {
		s.cfg.Blocks.Clear(s.emit)
	}
	w.WriteHeader(http.StatusOK)
}

// emit publishes one batch of the block cache's events.
func (s *Server) emit(events []codec.Event) {
	if s.cfg.Events == nil {
		return
	}
	if _, err := s.cfg.Events.Publish(events); err != nil {
		s.cfg.Logger.Error("publishing kv events", zap.Error(err))
	}
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: s.modelCards()})
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.active.Add(1)
	defer s.active.Add(-1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodySize))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return
	}
	sum := sha256.Sum256(body)
	info := RequestInfo{
		RequestID: r.Header.Get("X-Request-Id"), Path: r.URL.Path, ContentLength: contentLength(r),
		BodyLen: len(body), BodySHA256: hex.EncodeToString(sum[:]), Received: time.Now(),
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		if s.cfg.OnRequest != nil {
			s.cfg.OnRequest(info)
		}
		writeError(w, http.StatusBadRequest, "invalid JSON body")
		return
	}
	info.Stream = req.Stream
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(info)
	}
	g, status, err := s.newGeneration(r.Context(), r.URL.Path, info.RequestID, body, &req)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}

	var done DoneInfo
	s.waiting.Add(1)
	release, ok := s.engine.admit(r.Context())
	s.waiting.Add(-1)
	if !ok {
		done = DoneInfo{Canceled: true, At: time.Now()}
		if s.cfg.OnDone != nil {
			s.cfg.OnDone(info, done)
		}
		return
	}
	defer release()
	if req.Stream {
		done = g.stream(r.Context(), w)
	} else {
		done = g.complete(r.Context(), w)
	}
	if s.cfg.OnDone != nil {
		s.cfg.OnDone(info, done)
	}
}

// completionID derives the completion id from the request id (alphanumerics and '-', at most 32),
// or from the clock when there is none.
func completionID(reqID string) string {
	var b strings.Builder
	for _, c := range reqID {
		if b.Len() >= 32 {
			break
		}
		if c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			b.WriteRune(c)
		}
	}
	if b.Len() == 0 {
		return "chatcmpl-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return "chatcmpl-" + b.String()
}

// wait sleeps d or until ctx is done; it reports whether ctx is still live.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func contentLength(r *http.Request) int64 {
	if v := r.Header.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return r.ContentLength
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Error: apiErrorBody{Message: msg, Type: http.StatusText(status), Code: status}})
}

// newGeneration prepares the completion of a chat (or completions) body: the prompt the worker
// computes, its prefix cache lookup and its commit. The status goes with the error.
func (s *Server) newGeneration(ctx context.Context, path, reqID string, body []byte, req *chatRequest) (*generation, int, error) {
	lora, loraID, served := s.servedModel(req.Model) // the base model or a loaded adapter (lora.go)
	if !served {
		return nil, http.StatusNotFound, fmt.Errorf("the model %q does not exist", req.Model)
	}
	g := &generation{
		s: s, id: completionID(reqID), maxTokens: s.cfg.MaxTokens,
		includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		text:         path == "/v1/completions",
	}
	if req.MaxCompletionTokens != nil {
		g.maxTokens = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil {
		g.maxTokens = *req.MaxTokens
	}
	g.maxTokens = max(1, min(g.maxTokens, 4096))
	if s.cfg.Frontend != nil {
		p, err := s.cfg.Frontend.Prepare(ctx, body)
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		p.LoRAName, p.LoRAID = lora, loraID
		ch, err := s.cfg.Blocks.Chain(p)
		if err != nil {
			s.cfg.Logger.Error("chaining prompt blocks", zap.Error(err))
			return nil, http.StatusInternalServerError, err
		}
		g.promptTokens = len(p.Tokens)
		g.lookup = func() {
			g.hitBlocks = s.cfg.Blocks.HitBlocks(ch)
			g.cachedTokens = g.hitBlocks * s.cfg.BlockSize
		}
		g.prefilled = func() {
			if s.cfg.Blocks.Commit(ch, s.emit) > 0 && s.cfg.Events != nil {
				if err := s.cfg.Events.Flush(); err != nil {
					s.cfg.Logger.Warn("flushing kv events", zap.Error(err))
				}
			}
		}
	} else {
		var text strings.Builder
		for _, m := range req.Messages {
			text.WriteString(m.Role)
			text.WriteByte(' ')
			text.WriteString(m.text())
			text.WriteByte('\n')
		}
		var prompt string
		if g.text && json.Unmarshal(req.Prompt, &prompt) == nil {
			text.WriteString(prompt)
		}
		tokens := s.cfg.Tokenizer.Encode(text.String())
		g.promptTokens = len(tokens)
		g.lookup = func() {
			g.cachedTokens = s.cfg.Cache.Lookup(tokens)
			g.hitBlocks = g.cachedTokens / s.cfg.BlockSize
		}
		g.prefilled = func() { s.cfg.Cache.Store(tokens) }
	}
	return g, 0, nil
}
