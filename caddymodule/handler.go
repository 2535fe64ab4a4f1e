package caddymodule

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/router"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Default limits of DESIGN.md §6.
const (
	DefaultMaxBodySize = 64 << 20
	DefaultReadTimeout = 30 * time.Second

	// appStartWait bounds how long a request waits for the kvroute app to start.
	appStartWait = 10 * time.Second
)

// Handler is the `http.handlers.kvroute` handler. For a chat or completions POST it reads the body
// once (size cap → 413, read deadline → 408), rejects an unparseable body (400), each with the JSON
// error body of DESIGN.md §8 and without forwarding; it then asks the app's Decider for a routing
// decision, stores it in the request context for the kvroute selection policy, and hands the
// exact bytes (exact Content-Length, replayed on retries) to the next handler, normally
// reverse_proxy. Other requests pass with a "no preference" decision.
//
// The request id is the X-Request-Id header, else a generated one, which is then set on the
// forwarded request.
//
// Placeholders (request vars) set by this handler and the selection policy:
//
//	{http.vars.kvroute.worker}          id of the chosen worker ("" when none was known)
//	{http.vars.kvroute.overlap_blocks}  cached prefix of the worker that served, in blocks
//	{http.vars.kvroute.total_blocks}    complete blocks of the request
//	{http.vars.kvroute.fallback}        reason code when not routed exactly ("" when exact)
type Handler struct {
	// MaxBodySize is the largest request body read, in bytes; a larger one is answered with 413
	// `body_too_large`. Default: 64 MiB.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// ReadTimeout is how long the client may take to send the body; a slower one is answered with
	// 408 `body_timeout`. Default: 30s.
	ReadTimeout caddy.Duration `json:"read_timeout,omitempty"`

	app     *App
	logger  *zap.Logger
	metrics *metrics
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.kvroute",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets defaults and gets the kvroute app.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.MaxBodySize == 0 {
		h.MaxBodySize = DefaultMaxBodySize
	}
	if h.ReadTimeout == 0 {
		h.ReadTimeout = caddy.Duration(DefaultReadTimeout)
	}
	appIface, err := ctx.App("kvroute")
	if err != nil {
		return fmt.Errorf("getting kvroute app: %w", err)
	}
	h.app = appIface.(*App)
	h.metrics = h.app.metrics
	return nil
}

// Validate checks the limits.
func (h *Handler) Validate() error {
	if h.MaxBodySize < 0 {
		return fmt.Errorf("max_body_size must not be negative")
	}
	if h.ReadTimeout < 0 {
		return fmt.Errorf("read_timeout must not be negative")
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	// During a reload the new HTTP server may take requests before the kvroute app has started;
	// wait for it (typically < 0.3 s) rather than route without its worker list.
	h.app.waitStarted(r.Context(), appStartWait)
	reqID := r.Header.Get("X-Request-Id")
	if reqID == "" || len(reqID) > 200 {
		reqID = newRequestID()
		r.Header.Set("X-Request-Id", reqID)
	}
	// Every answer carries the id, also errors written by Caddy itself (issue 11 item 4).
	w.Header().Set("X-Request-Id", reqID)

	dec := h.app.Decider()
	var body []byte
	var pooled *pooledBuf // the body's buffer when pooled: given back when the request is over
	if routedBody(r) {
		b, pb, err := readBody(w, r, h.MaxBodySize, time.Duration(h.ReadTimeout))
		if err != nil {
			return h.fail(w, r, reqID, err)
		}
		if !parsesBody(dec) && !jsonValid(b) {
			pb.put()
			return h.fail(w, r, reqID, reason.New(reason.BodyInvalid, "request body is not valid JSON"))
		}
		body, pooled = b, pb
	}

	ws, available := h.app.decisionWorkers()
	d, err := dec.Decide(r.Context(), &RouteInput{Request: r, RequestID: reqID, Body: body, Workers: ws.all, Available: available, routed: ws.routed})
	if err != nil {
		if code := reason.CodeOf(err); code.IsClientError() {
			pooled.put() // the error holds no byte of the body (reason errors are text)
			return h.fail(w, r, reqID, err)
		}
		code := reason.CodeOf(err)
		if code == "" {
			code = reason.IndexUnavailable
		}
		h.logger.Error("computing routing decision", zap.String("request_id", reqID), zap.Error(err))
		d = &Decision{Result: router.Result{Fallback: code}}
	}
	if d == nil {
		d = notRouted()
	}
	readResponseFields(r, d, body)
	if id := responseRefID(r, d); id != "" {
		// a stored response lives on one worker: pin to it, or answer without forwarding
		if err := h.pinToResponse(r.Context(), d, id); err != nil {
			if d.handle != nil {
				d.handle.Done()
			}
			pooled.put()
			return h.fail(w, r, reqID, err)
		}
	}
	d.RequestID = reqID
	if d.Body != nil && body != nil {
		body = d.Body // the client's bytes with the forwarded identities spliced in
	}
	if body != nil {
		// The replay body owns the pooled buffer (even when the spliced body is forwarded
		// instead): done closes every proxy reader, then gives the buffer back.
		d.attempts.body = newReplayBody(body, pooled)
		d.attempts.body.install(r)
		defer d.attempts.body.done()
	}
	h.record(r, d)
	// Load accounting (DESIGN.md §1 step 7): prefill tokens until the first response byte, decode
	// blocks until the response ends or the client goes away (the proxy then cancels upstream).
	if d.handle != nil {
		defer d.handle.Done()
	}
	rw := &firstByteWriter{ResponseWriter: w, handle: d.handle, requestID: reqID, onFirst: func() { h.countDecision(d) }}
	var out http.ResponseWriter = rw
	if learnsResponse(r, d) {
		out = &idSniffer{ResponseWriter: rw, learn: func(id string) { h.app.responses.Learn(id, d.Served()) }}
	}
	err = next.ServeHTTP(out, r.WithContext(WithDecision(r.Context(), d)))
	h.countDecision(d) // no response byte: the last attempt failed, or none was made
	code := upstreamErrorCode(err)
	// the last attempt's outcome: a transport failure marks its worker down, an answer marks it
	// alive
	d.attempts.finish(h.app, err, code == reason.UpstreamError || code == reason.UpstreamTimeout)
	if err != nil && !rw.wrote && d.pinned != "" && (code == reason.UpstreamError || code == reason.UpstreamUnavailable) {
		// the one worker holding the stored response failed or is gone: say so, never retry
		// elsewhere (choosePinned)
		code = reason.ResponseWorkerUnavailable
		h.metrics.errors.WithLabelValues(string(code)).Inc()
		h.logger.Warn("stored response's worker failed", zap.String("request_id", reqID), zap.String("worker_id", d.pinned), zap.Error(err))
		writeError(w, shapeFor(r.URL.Path, r.Header), reason.New(code, "the worker that holds this stored response is not available; no other worker has it"))
		return nil
	}
	if err != nil && !rw.wrote {
		if code != "" {
			h.metrics.errors.WithLabelValues(string(code)).Inc()
			h.logger.Warn("upstream failed", zap.String("request_id", reqID), zap.String("code", string(code)), zap.Error(err))
			writeError(w, shapeFor(r.URL.Path, r.Header), reason.New(code, "%s", upstreamMessages[code]))
			return nil
		}
	}
	return err
}

// upstreamMessages are the messages of the upstream error answers: fixed texts, so no worker
// address or internal error reaches the client.
var upstreamMessages = map[reason.Code]string{
	reason.UpstreamError:       "the worker chosen for this request failed; retry the request",
	reason.UpstreamUnavailable: "no worker is available for this request; retry later",
	reason.UpstreamTimeout:     "the worker did not answer in time",
}

// upstreamErrorCode maps the error reverse_proxy returned before any response byte (a Caddy
// HandlerError with 502, 503 or 504) to its reason code; "" for any other error, which Caddy
// answers itself.
func upstreamErrorCode(err error) reason.Code {
	var he caddyhttp.HandlerError
	if !errors.As(err, &he) {
		return ""
	}
	switch he.StatusCode {
	case http.StatusBadGateway:
		return reason.UpstreamError
	case http.StatusServiceUnavailable:
		return reason.UpstreamUnavailable
	case http.StatusGatewayTimeout:
		return reason.UpstreamTimeout
	}
	return ""
}

// countDecision counts the decision in caddy_kvroute_decisions_total, once: at the first
// response byte, or after the proxy returned without one. The worker label is the worker the
// request actually went to (the latest attempt's: a retry, or a next-best or fallback pick when
// the chosen worker was down or full), so per-worker rates show where traffic goes; the decision's
// choice when no attempt was made; "" for no preference, whichever upstream the fallback picked.
func (h *Handler) countDecision(d *Decision) {
	if !d.counted.CompareAndSwap(false, true) {
		return
	}
	worker := d.WorkerID()
	if s, _ := d.attempts.latest(); s != "" && worker != "" {
		worker = s
	}
	h.metrics.decisions.WithLabelValues(modelLabel(d.Model, h.app.WorkerList()), worker, string(d.Fallback)).Inc()
}

// record sets the request vars and logs the [ROUTING] line; the decision is counted once the
// worker that gets the request is known (countDecision).
func (h *Handler) record(r *http.Request, d *Decision) {
	setDecisionVars(r, d)
	if d.TotalBlocks > 0 {
		h.metrics.hitRatio.Observe(float64(d.OverlapBlocks) / float64(d.TotalBlocks))
	}
	if c := h.logger.Check(zapcore.InfoLevel, "[ROUTING]"); c != nil {
		fields := []zap.Field{
			zap.String("request_id", d.RequestID),
			zap.String("model", d.Model),
			zap.String("worker_id", d.WorkerID()),
			zap.String("endpoint", d.Endpoint()),
			zap.Int("overlap_blocks", d.OverlapBlocks),
			zap.Int("total_blocks", d.TotalBlocks),
			zap.String("fallback", string(d.Fallback)),
			zap.Any("costs", costsOrEmpty(d.Costs)),
		}
		if d.Affinity != nil {
			// media kvroute did not decode: its key's rendezvous worker got the affinity credit
			fields = append(fields, zap.String("affinity", d.Affinity.WorkerID), zap.String("affinity_key", d.Affinity.Key))
		}
		c.Write(fields...)
	}
}

// fail answers a kvroute client error with its JSON body, or returns a server error to Caddy.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, reqID string, err error) error {
	var re *reason.Error
	if errors.As(err, &re) && re.Code.IsClientError() {
		h.metrics.errors.WithLabelValues(string(re.Code)).Inc()
		if c := h.logger.Check(zapcore.DebugLevel, "rejecting request"); c != nil {
			c.Write(zap.String("request_id", reqID), zap.String("code", string(re.Code)), zap.Error(err))
		}
		w.Header().Set("X-Request-Id", reqID)
		if re.Code == reason.BodyTooLarge || re.Code == reason.BodyTimeout {
			// the rest of the body is unread: close instead of draining it from a slow client
			w.Header().Set("Connection", "close")
		}
		writeError(w, shapeFor(r.URL.Path, r.Header), re)
		return nil
	}
	return caddyhttp.Error(http.StatusInternalServerError, err)
}

// setDecisionVars sets the kvroute request vars once, before the proxy runs. The worker and
// overlap vars read the worker of the latest proxy attempt (Decision.Served), which the selection policy updates
// without writing the vars map: a retry's write would race an earlier attempt's dial, which
// reads the same map from its own goroutine.
func setDecisionVars(r *http.Request, d *Decision) {
	ctx := r.Context()
	caddyhttp.SetVar(ctx, "kvroute.worker", servedVar{d})
	caddyhttp.SetVar(ctx, "kvroute.overlap_blocks", servedOverlapVar{d})
	caddyhttp.SetVar(ctx, "kvroute.total_blocks", d.TotalBlocks)
	caddyhttp.SetVar(ctx, "kvroute.fallback", string(d.Fallback))
}

// routedBody reports whether the request's body is read and routed on: a POST to a chat or
// completions path (router.ClassifyPath, the router's own rule). Other requests are routed on
// load alone and their bodies stream through.
func routedBody(r *http.Request) bool {
	return r.Method == http.MethodPost && router.ClassifyPath(r.URL.Path) != router.PathOther
}

// newRequestID returns 32 random hex digits.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
