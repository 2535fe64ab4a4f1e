package caddymodule

import (
	"context"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/respmap"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/apis"
	"github.com/kvroute/kvroute/routing/router"
)

// Stored responses (DESIGN.md §1.1): a /v1/responses answer made with store true lives in the
// memory of the worker that made it. The handler learns id → worker from the answers it proxies
// (idSniffer), and pins a follow-up (previous_response_id) and GET/DELETE /responses/{id} and
// POST /responses/{id}/cancel to that worker (Decision.pinned, honoured by the selection policy);
// when the worker is unknown or not available the request is answered with
// response_worker_unavailable, never sent elsewhere.

// sharedResponses is the process's stored-response map in sharedPool (key responsesKey). It
// outlives config reloads and NATS reconnects (the bucket is attached once the shared NATS opens
// it); its size and TTL are those of the config that created it (`responses` options; a change
// applies once no running config uses the map any more, at the latest at the next process start).
type sharedResponses struct{ m *respmap.Map }

// responsesKey is the sharedPool key of the stored-response map: one per process.
const responsesKey = "responses"

// Destruct stops the map's bucket writer (the last config using it was cleaned up).
func (r sharedResponses) Destruct() error {
	r.m.Close()
	return nil
}

// acquireResponses takes this config's reference to the stored-response map.
func (a *App) acquireResponses() error {
	v, err := a.acquireShared(responsesKey, func() (caddy.Destructor, error) {
		return sharedResponses{respmap.New(a.APIs.maxResponses(), a.APIs.ttl(), caddy.Log().Named("kvroute.responses"))}, nil
	})
	if err != nil {
		return err
	}
	a.responses = v.(sharedResponses).m
	return nil
}

// readResponseFields fills d's previous_response_id and store for a Responses POST the router
// did not read them from (no model_dir, or a Decider other than the routing core): stickiness does
// not depend on KV routing.
func readResponseFields(r *http.Request, d *Decision, body []byte) {
	if d.ResponseFieldsRead || body == nil || r.Method != http.MethodPost || router.ClassifyPath(r.URL.Path) != router.PathResponses {
		return
	}
	if rr, _ := apis.FromResponses(body, apis.ResponsesOptions{StoreEnabled: true}); rr != nil {
		d.PreviousResponseID, d.StoresResponse, d.ResponseFieldsRead = rr.PreviousResponseID, rr.Store, true
	}
}

// responseRefID returns the stored response a request must reach: a Responses POST's
// previous_response_id, or the {id} of /responses/{id} (GET, DELETE) and /responses/{id}/cancel
// (POST); "" for none.
func responseRefID(r *http.Request, d *Decision) string {
	if d != nil && d.PreviousResponseID != "" {
		return d.PreviousResponseID
	}
	p := r.URL.Path
	i := strings.LastIndex(p, "/responses/")
	if i < 0 {
		return ""
	}
	rest := p[i+len("/responses/"):]
	id, tail, _ := strings.Cut(rest, "/")
	switch {
	case id == "":
		return ""
	case tail == "" && (r.Method == http.MethodGet || r.Method == http.MethodDelete):
		return id
	case tail == "cancel" && r.Method == http.MethodPost:
		return id
	}
	return ""
}

// pinToResponse pins d to the worker holding response id, or returns the
// response_worker_unavailable error.
func (h *Handler) pinToResponse(ctx context.Context, d *Decision, id string) error {
	m := h.app.responses
	worker, _, ok, err := m.Lookup(ctx, id)
	if err != nil {
		h.logger.Warn("reading the stored-response bucket", zap.String("response_id", id), zap.Error(err))
	}
	if !ok {
		return reason.New(reason.ResponseWorkerUnavailable, "no worker is known to hold response %q: kvroute learns stored responses from the answers it proxies and keeps them %s", id, m.TTL())
	}
	var ep string
	for _, w := range h.app.WorkerList() {
		if w.WorkerID == worker {
			ep = w.Endpoint
		}
	}
	if ep == "" || h.app.health.Load().isDown(worker) {
		return reason.New(reason.ResponseWorkerUnavailable, "the worker that holds response %q is not available; no other worker has it", id)
	}
	c := router.Candidate{WorkerID: worker, Endpoint: ep, Available: true}
	for _, rc := range d.Ranked {
		if rc.WorkerID == worker {
			c = rc
		}
	}
	d.OverlapBlocks = d.OverlapOn(worker)
	d.Chosen = &c
	d.pinned = worker
	return nil
}

// learnsResponse reports whether the answer to r carries a stored response's id to learn: a
// Responses POST with store true (router.Result.StoresResponse).
func learnsResponse(r *http.Request, d *Decision) bool {
	return r.Method == http.MethodPost && d.StoresResponse && router.ClassifyPath(r.URL.Path) == router.PathResponses
}

// idSniffer passes the response through unchanged and unbuffered, looking at the first
// apis.MaxResponseIDScan bytes of a 2xx answer for the response id; learn is called once with it.
type idSniffer struct {
	http.ResponseWriter
	learn  func(id string)
	status int
	buf    []byte
	done   bool
}

func (s *idSniffer) WriteHeader(status int) {
	if s.status == 0 && status >= 200 {
		s.status = status
		if status >= 300 || s.Header().Get("Content-Encoding") != "" {
			s.done = true // an error answer, or bytes kvroute would have to decode
		}
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *idSniffer) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	if !s.done {
		n := min(len(b), apis.MaxResponseIDScan-len(s.buf))
		s.buf = append(s.buf, b[:n]...)
		if id, ok := apis.ScanResponseID(s.buf); ok {
			s.learn(id)
			s.done, s.buf = true, nil
		} else if len(s.buf) >= apis.MaxResponseIDScan {
			s.done, s.buf = true, nil
		}
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap, FlushError and Flush: see firstByteWriter (SSE must flush through).
func (s *idSniffer) Unwrap() http.ResponseWriter { return s.ResponseWriter }
func (s *idSniffer) FlushError() error {
	return http.NewResponseController(s.ResponseWriter).Flush()
}
func (s *idSniffer) Flush() { _ = s.FlushError() }
