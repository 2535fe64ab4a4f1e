// Package caddytest runs Caddy inside this process for the integration tests and the bench
// programs: free loopback ports, loopback HTTP servers, a Caddyfile adapted and loaded into the
// process's one Caddy instance (a first start or a reload), and the running kvroute app. Only
// tests and the bench programs import it.
package caddytest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	// the Caddyfile adapter and the standard modules (reverse_proxy, header, log, TLS) the
	// configurations use
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/kvroute/kvroute/caddymodule"
)

// QuietGlobals are the global options (inside the global options block, one tab deep) that every
// in-process Caddy of the tests and bench programs starts with: no automatic HTTPS, no autosaved
// config, Caddy's own log discarded.
const QuietGlobals = "auto_https off\n\tpersist_config off\n\tlog {\n\t\toutput discard\n\t}"

// FreePort returns a TCP port of 127.0.0.1 that nothing listened on a moment ago.
func FreePort() (int, error) {
	// Below Linux's ephemeral range (32768–60999) first: a port the kernel hands out for port 0
	// is free when checked, but can be handed to another test process's connection before the
	// caller binds it (go test runs packages in parallel; a bridge test failed that way).
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(20000+rand.IntN(12000)))
		if err == nil {
			defer ln.Close()
			return ln.Addr().(*net.TCPAddr).Port, nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Port is FreePort for a test: an error fails it.
func Port(tb testing.TB) int {
	tb.Helper()
	p, err := FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Serve serves h on a random 127.0.0.1 port and returns the server (Close stops it) and its
// host:port.
func Serve(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln.Addr().String(), nil
}

// Load adapts caddyfile and loads it into this process's Caddy: the first start, or a reload of
// the running configuration.
func Load(caddyfile string) error {
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		return fmt.Errorf("adapting the Caddyfile: %w", err)
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		return fmt.Errorf("loading Caddy: %w", err)
	}
	return nil
}

// MustLoad is Load for a test: an error fails it.
func MustLoad(tb testing.TB, caddyfile string) {
	tb.Helper()
	if err := Load(caddyfile); err != nil {
		tb.Fatal(err)
	}
}

// Start loads caddyfile (MustLoad) and stops Caddy when the test ends, after beforeStop (nil:
// nothing; e.g. closing the test client's idle connections).
func Start(tb testing.TB, caddyfile string, beforeStop func()) {
	tb.Helper()
	MustLoad(tb, caddyfile)
	tb.Cleanup(func() {
		if beforeStop != nil {
			beforeStop()
		}
		Stop(tb)
	})
}

// App returns the running kvroute app.
func App() (*caddymodule.App, error) {
	a, err := caddy.ActiveContext().App("kvroute")
	if err != nil {
		return nil, err
	}
	return a.(*caddymodule.App), nil
}

// Stop stops Caddy; an error fails the test (but lets it go on).
func Stop(tb testing.TB) {
	tb.Helper()
	if err := caddy.Stop(); err != nil {
		tb.Errorf("stopping caddy: %v", err)
	}
}
