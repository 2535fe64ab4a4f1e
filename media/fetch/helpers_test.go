package fetch_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
)

// countingListener accepts TCP connections on addr, counts them and closes them at once. It stops
// when the test ends.
type countingListener struct {
	ln       net.Listener
	accepted atomic.Int64
	done     chan struct{}
}

func listenCounting(t *testing.T, addr string) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	c := &countingListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-c.done })
	return c
}

func (c *countingListener) port() string {
	_, p, _ := net.SplitHostPort(c.ln.Addr().String())
	return p
}

// mapResolver answers from a fixed table and counts lookups; unknown names are NXDOMAIN.
type mapResolver struct {
	mu    sync.Mutex // guards calls and answers
	calls map[string]int
	table map[string][]string
	// seq, when set for a name, gives the answer of the n-th lookup (the last one repeats).
	seq map[string][][]string
}

func newResolver(table map[string][]string) *mapResolver {
	return &mapResolver{calls: map[string]int{}, table: table, seq: map[string][][]string{}}
}

func (r *mapResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.calls[host]
	r.calls[host]++
	ips, ok := r.table[host]
	if s := r.seq[host]; len(s) > 0 {
		ips, ok = s[min(n, len(s)-1)], true
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, len(ips))
	for i, s := range ips {
		out[i] = net.IPAddr{IP: net.ParseIP(s)}
	}
	return out, nil
}

func (r *mapResolver) lookups(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// server is an httptest server on 127.0.0.1 that counts requests.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) port() string {
	u, _ := url.Parse(s.URL)
	return u.Port()
}

// redirector answers /to?u=<target> with a 302 to target, anything else with body.
func redirector(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/to" {
			http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
			return
		}
		w.Write(body)
	}
}

func newFetcher(t *testing.T, cfg *fetch.Config) *fetch.Fetcher {
	t.Helper()
	f, err := fetch.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(f.Close)
	return f
}

// wantCode asserts that err is a *reason.Error with code want.
func wantCode(t *testing.T, what string, err error, want reason.Code) {
	t.Helper()
	var re *reason.Error
	if !errors.As(err, &re) {
		t.Errorf("%s: err = %v (%T), want *reason.Error %s", what, err, err, want)
		return
	}
	if re.Code != want {
		t.Errorf("%s: code = %s (%v), want %s", what, re.Code, err, want)
	}
}
