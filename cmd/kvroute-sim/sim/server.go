package sim

import (
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
	// TokenDelay is waited before each further token. Default: 0.
	TokenDelay time.Duration
	// MaxTokens is the completion length when the request sets none. Default: 8. Requests may ask
	// for at most 4096.
	MaxTokens int
	// MaxBodySize caps the request body. Default: 256 MiB.
	MaxBodySize int64
	// Tokenizer counts prompt tokens. Default: WordTokenizer.
	Tokenizer Tokenizer
	// Cache answers cached_tokens. Default: NoCache.
	Cache Cache
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
}

// New returns a Server; cfg may be nil.
func New(cfg *Config) *Server {
	c := *DefaultConfig()
	if cfg != nil {
		if cfg.WorkerID != "" {
			c.WorkerID = cfg.WorkerID
		}
		if cfg.Model != "" {
			c.Model = cfg.Model
		}
		if cfg.BlockSize > 0 {
			c.BlockSize = cfg.BlockSize
		}
		c.PrefillDelay, c.TokenDelay = cfg.PrefillDelay, cfg.TokenDelay
		if cfg.MaxTokens > 0 {
			c.MaxTokens = cfg.MaxTokens
		}
		if cfg.MaxBodySize > 0 {
			c.MaxBodySize = cfg.MaxBodySize
		}
		if cfg.Tokenizer != nil {
			c.Tokenizer = cfg.Tokenizer
		}
		if cfg.Cache != nil {
			c.Cache = cfg.Cache
		}
		c.OnRequest, c.OnDone = cfg.OnRequest, cfg.OnDone
	}
	return &Server{cfg: c, started: time.Now()}
}

// Config returns the effective configuration.
func (s *Server) Config() Config { return s.cfg }

// Requests returns how many chat requests were received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// Active returns how many chat requests are in flight.
func (s *Server) Active() int64 { return s.active.Load() }

// Handler returns the worker's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelCard{{
		ID: s.cfg.Model, Object: "model", Created: s.started.Unix(), OwnedBy: "kvroute-sim",
	}}})
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
	if req.Model != "" && req.Model != s.cfg.Model {
		writeError(w, http.StatusNotFound, fmt.Sprintf("the model %q does not exist", req.Model))
		return
	}

	var text strings.Builder
	for _, m := range req.Messages {
		text.WriteString(m.Role)
		text.WriteByte(' ')
		text.WriteString(m.text())
		text.WriteByte('\n')
	}
	tokens := s.cfg.Tokenizer.Encode(text.String())
	g := &generation{
		s: s, id: completionID(info.RequestID),
		promptTokens: len(tokens), cachedTokens: s.cfg.Cache.Lookup(tokens), maxTokens: s.cfg.MaxTokens,
		includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
	}
	if req.MaxCompletionTokens != nil {
		g.maxTokens = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil {
		g.maxTokens = *req.MaxTokens
	}
	g.maxTokens = max(1, min(g.maxTokens, 4096))

	var done DoneInfo
	if req.Stream {
		done = g.stream(r.Context(), w)
	} else {
		done = g.complete(r.Context(), w)
	}
	if !done.Canceled {
		s.cfg.Cache.Store(tokens)
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
