package fetch_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
)

// TestSSRFGuard is field report 18: nothing the client names may reach loopback, private or link-local
// addresses, however it is spelled, directly or through a redirect. Listeners on 127.0.0.1 and [::1]
// stand in for the Caddy admin API and NATS and must see zero connections; the only reachable endpoint
// is the "allowed" media server, opened by an exact AllowAddrs entry (which is how the demo opens its
// loopback media server without opening the rest of loopback).
func TestSSRFGuard(t *testing.T) {
	v4 := listenCounting(t, "127.0.0.1:0")
	v6 := listenCounting(t, "[::1]:0")
	p4, p6 := v4.port(), v6.port()
	allowed := newServer(t, redirector([]byte("media")))
	pa := allowed.port()

	r := newResolver(map[string][]string{
		"allowed.test": {"127.0.0.1"},
		"evil.test":    {"127.0.0.1"},
		"evil6.test":   {"::1"},
		"localhost":    {"127.0.0.1", "::1"},
		"mixed.test":   {"8.8.8.8", "127.0.0.1"}, // one refused answer refuses the name: nothing is dialed
		"mapped.test":  {"::ffff:127.0.0.1"},
		"imds.test":    {"169.254.169.254"},
	})
	cfg := fetch.DefaultConfig()
	cfg.Resolver = r
	cfg.AllowAddrs = []string{"127.0.0.1:" + pa}
	f := newFetcher(t, cfg)
	ctx := context.Background()

	// Positive control: the allowed endpoint is reachable, by IP and by name.
	for _, u := range []string{allowed.URL + "/m", "http://allowed.test:" + pa + "/m"} {
		if b, err := f.Fetch(ctx, u); err != nil || string(b) != "media" {
			t.Fatalf("allowed endpoint %s: %q, %v", u, b, err)
		}
	}

	direct := []string{
		"http://127.0.0.1:" + p4 + "/config/",
		"http://0x7f000001:" + p4 + "/",
		"http://0X7F000001:" + p4 + "/",
		"http://2130706433:" + p4 + "/",
		"http://127.1:" + p4 + "/",
		"http://0177.0.0.1:" + p4 + "/",
		"http://127.0.0.1.:" + p4 + "/",
		"http://[::1]:" + p6 + "/",
		"http://[0:0:0:0:0:0:0:1]:" + p6 + "/",
		"http://[::ffff:127.0.0.1]:" + p4 + "/",
		"http://[::ffff:7f00:1]:" + p4 + "/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fe80::1%25lo]:" + p6 + "/",
		"http://10.0.0.5/",
		"http://0.0.0.0:" + p4 + "/",
		"http://[::]:" + p6 + "/",
		"http://evil.test:" + p4 + "/",
		"http://EVIL.test.:" + p4 + "/",
		"http://evil6.test:" + p6 + "/",
		"http://localhost:" + p4 + "/",
		"http://mixed.test:" + p4 + "/",
		"http://mapped.test:" + p4 + "/",
		"http://imds.test/",
		"https://evil.test:" + p4 + "/",
		"http://allowed.test@127.0.0.1:" + p4 + "/",
		"http://allowed.test:" + p4 + "/", // the allowed name, another port
		"gopher://127.0.0.1:" + p4 + "/_GET",
		"ftp://127.0.0.1:" + p4 + "/",
		"file:///etc/passwd",
		"FILE:///etc/passwd",
		"javascript:alert(1)",
		"/etc/passwd",
		"../../etc/passwd",
		"//127.0.0.1:" + p4 + "/",
		"http:///nohost",
		"http://[::1",
	}
	for _, u := range direct {
		_, err := f.Fetch(ctx, u)
		wantCode(t, u, err, reason.MediaURLBlocked)
	}

	// Redirects from the allowed endpoint: each hop is checked (scheme, host, and dialed address).
	targets := []string{
		"http://127.0.0.1:" + p4 + "/",
		"http://0x7f000001:" + p4 + "/",
		"http://2130706433:" + p4 + "/",
		"http://[::1]:" + p6 + "/",
		"http://169.254.169.254/",
		"http://evil.test:" + p4 + "/",
		"http://allowed.test:" + p4 + "/",
		"http://localhost:" + p6 + "/",
		"file:///etc/passwd",
		"gopher://127.0.0.1:" + p4 + "/",
	}
	before := allowed.hits.Load()
	for _, target := range targets {
		u := "http://allowed.test:" + pa + "/to?u=" + url.QueryEscape(target)
		_, err := f.Fetch(ctx, u)
		wantCode(t, "redirect to "+target, err, reason.MediaURLBlocked)
	}
	if got := allowed.hits.Load() - before; got != int64(len(targets)) {
		t.Errorf("allowed server saw %d redirect requests, want %d (the first hop must connect)", got, len(targets))
	}

	if n := v4.accepted.Load(); n != 0 {
		t.Errorf("127.0.0.1 listener accepted %d connections, want 0", n)
	}
	if n := v6.accepted.Load(); n != 0 {
		t.Errorf("[::1] listener accepted %d connections, want 0", n)
	}
	if n := r.lookups("mixed.test"); n != 1 {
		t.Errorf("mixed.test looked up %d times, want 1", n)
	}
	for _, h := range []string{"0x7f000001", "2130706433", "127.1", "0177.0.0.1"} {
		if n := r.lookups(h); n != 0 {
			t.Errorf("odd IPv4 spelling %q reached the resolver %d times, want 0", h, n)
		}
	}
}

// TestDNSRebinding: the address that is checked is the address that is dialed; the name is resolved
// once per connection. A resolver that answers the allowed address first and a loopback address
// afterwards cannot move an accepted fetch onto loopback.
func TestDNSRebinding(t *testing.T) {
	allowed := newServer(t, redirector([]byte("media")))
	pa := allowed.port()
	other := listenCounting(t, "127.0.0.2:"+pa) // same port, another loopback address
	r := newResolver(nil)
	r.seq["rebind.test"] = [][]string{{"127.0.0.1"}, {"127.0.0.2"}}
	cfg := fetch.DefaultConfig()
	cfg.Resolver = r
	cfg.AllowAddrs = []string{"127.0.0.1:" + pa}

	f := newFetcher(t, cfg)
	b, err := f.Fetch(context.Background(), "http://rebind.test:"+pa+"/m")
	if err != nil || string(b) != "media" {
		t.Fatalf("first fetch: %q, %v", b, err)
	}
	if n := r.lookups("rebind.test"); n != 1 {
		t.Errorf("one connection looked the name up %d times, want 1", n)
	}
	f.Close() // force a new connection, hence a new lookup, which now answers 127.0.0.2
	_, err = f.Fetch(context.Background(), "http://rebind.test:"+pa+"/m")
	wantCode(t, "rebound fetch", err, reason.MediaURLBlocked)
	if n := other.accepted.Load(); n != 0 {
		t.Errorf("127.0.0.2 listener accepted %d connections, want 0", n)
	}
}
