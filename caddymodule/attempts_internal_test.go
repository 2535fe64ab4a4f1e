package caddymodule

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// healthLog records what the attempt bookkeeping reported.
type healthLog struct {
	failed []string // endpoint + " " + cause
	served []string // endpoint
	at     []time.Time
}

func (h *healthLog) markFailed(ep, cause string) { h.failed = append(h.failed, ep+" "+cause) }
func (h *healthLog) markServed(ep string, at time.Time) {
	h.served = append(h.served, ep)
	h.at = append(h.at, at)
}

// TestAttemptsBookkeeping drives one request's attempts as Caddy's loop does (begin, record per
// attempt; finish once) and checks each job of the type: the failed try marked, the tries
// tracked, the next endpoint after a failure, the attempt recorded (worker, load moved), the body
// reinstalled, the last attempt judged once.
func TestAttemptsBookkeeping(t *testing.T) {
	var a attempts
	a.body = newReplayBody([]byte("abcdef"), nil)
	h := &healthLog{}
	var moved []string
	move := func(w string) { moved = append(moved, w) }
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader("stale"))
	ranked := []string{"127.0.0.1:9002", "127.0.0.1:9001"}

	if w, ok := a.latest(); w != "" || ok {
		t.Fatalf("before any attempt: latest %q %v", w, ok)
	}
	// attempt 1: nothing to judge yet; the body is installed
	a.begin(req, h)
	if len(h.failed) != 0 {
		t.Fatalf("first attempt marked %v failed", h.failed)
	}
	if b, _ := io.ReadAll(req.Body); string(b) != "abcdef" || req.ContentLength != 6 {
		t.Fatalf("attempt 1 body %q length %d", b, req.ContentLength)
	}
	if got := a.next(ranked); !reflect.DeepEqual(got, ranked) {
		t.Fatalf("next before any try %v", got)
	}
	a.record("http://127.0.0.1:9002", "127.0.0.1:9002", "w2", move)
	if w, ok := a.latest(); w != "w2" || !ok {
		t.Fatalf("after attempt 1: latest %q %v", w, ok)
	}
	if !a.wasTried("127.0.0.1:9002") || a.wasTried("127.0.0.1:9001") {
		t.Fatal("tries not tracked")
	}

	// attempt 2: Caddy asks again, so attempt 1 failed; the next-best endpoint comes first
	a.begin(req, h)
	if !reflect.DeepEqual(h.failed, []string{"127.0.0.1:9002 proxy attempt failed"}) {
		t.Fatalf("failed marks %v", h.failed)
	}
	if b, _ := io.ReadAll(req.Body); string(b) != "abcdef" {
		t.Fatalf("attempt 2 body %q (not reinstalled)", b)
	}
	if got := a.next(ranked); !reflect.DeepEqual(got, []string{"127.0.0.1:9001"}) {
		t.Fatalf("next after a failure %v", got)
	}
	pool := testPool()
	if got := a.untried(pool); len(got) != 2 || got[0].Dial != "127.0.0.1:9000" || got[1].Dial != "127.0.0.1:9001" {
		t.Fatalf("untried %v", dials(got))
	}
	// an upstream that is no known worker: tried by its dial address, no worker, no load move
	a.record("127.0.0.1:9000", "127.0.0.1:9000", "", move)
	if w, ok := a.latest(); w != "" || !ok {
		t.Fatalf("after attempt 2: latest %q %v", w, ok)
	}

	// attempt 3 goes to w1; then every upstream was tried: the whole pool is offered again
	a.begin(req, h)
	a.record("127.0.0.1:9001", "127.0.0.1:9001", "w1", move)
	if got := a.untried(pool); len(got) != 3 {
		t.Fatalf("all tried: untried %v, want the whole pool", dials(got))
	}
	if len(a.next(ranked)) != 0 {
		t.Fatal("next offers a tried endpoint")
	}
	if !reflect.DeepEqual(moved, []string{"w2", "w1"}) {
		t.Fatalf("load moved to %v", moved)
	}
	if len(h.failed) != 2 || h.failed[1] != "127.0.0.1:9000 proxy attempt failed" {
		t.Fatalf("failed marks %v", h.failed)
	}

	// the proxy answered: the last attempt's worker is alive; judged once
	a.finish(h, nil, false)
	a.finish(h, nil, false)
	if !reflect.DeepEqual(h.served, []string{"127.0.0.1:9001"}) || h.at[0].IsZero() {
		t.Fatalf("served marks %v %v", h.served, h.at)
	}
}

// TestAttemptsFinish: a transport failure marks the last attempt's worker down; another error (a
// 503 with no upstream, an error after the answer) says nothing about it.
func TestAttemptsFinish(t *testing.T) {
	for _, c := range []struct {
		transport  bool
		wantFailed int
	}{{true, 1}, {false, 0}} {
		var a attempts
		h := &healthLog{}
		a.record("127.0.0.1:9001", "127.0.0.1:9001", "w1", nil)
		a.finish(h, errors.New("dial tcp: connection refused"), c.transport)
		if len(h.failed) != c.wantFailed || len(h.served) != 0 {
			t.Errorf("transport failure %v: failed %v served %v", c.transport, h.failed, h.served)
		}
		if c.wantFailed == 1 && h.failed[0] != "127.0.0.1:9001 dial tcp: connection refused" {
			t.Errorf("failed mark %q", h.failed[0])
		}
	}
	// nothing selected: nothing to judge
	var a attempts
	h := &healthLog{}
	a.finish(h, nil, false)
	a.begin(httptest.NewRequest(http.MethodGet, "/", nil), h)
	if len(h.failed)+len(h.served) != 0 {
		t.Errorf("judged an attempt never made: %v %v", h.failed, h.served)
	}
}

func dials(pool reverseproxy.UpstreamPool) []string {
	out := make([]string, len(pool))
	for i, up := range pool {
		out[i] = up.Dial
	}
	return out
}
