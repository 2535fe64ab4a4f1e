package caddymodule

import (
	"context"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestSharedNATSStartFailures: a failing start returns its error (field report from a user test:
// the cleanup used to run on a nil state and panic, which also wedged `caddy reload`).
func TestSharedNATSStartFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	for name, cfg := range map[string]natsConfig{
		"embedded port taken":   {host: "127.0.0.1", port: busy},
		"embedded not loopback": {host: "0.0.0.0", port: -1},
		"url not a url":         {url: "nats://[::1"}, // an unreachable URL is not an error: NATS may start later
	} {
		st, err := newSharedNATS(cfg, zap.NewNop(), nil)
		if err == nil || st != nil {
			t.Errorf("%s: state %v, err %v; want an error and no state", name, st, err)
		}
	}
}

func TestValidateRejectsUnsafeOrMalformed(t *testing.T) {
	for name, a := range map[string]*App{
		"embedded on all interfaces": {EmbeddedNATS: &EmbeddedNATS{Host: "0.0.0.0", Port: 4222}},
		"bad cidr":                   {EmbeddedNATS: &EmbeddedNATS{Host: "127.0.0.1", Port: 4222}, RoutingConfig: RoutingConfig{Media: &MediaConfig{AllowCIDRs: []string{"notacidr"}}}},
		"bad addr":                   {EmbeddedNATS: &EmbeddedNATS{Host: "127.0.0.1", Port: 4222}, RoutingConfig: RoutingConfig{Media: &MediaConfig{AllowAddrs: []string{"10.0.0.1"}}}},
	} {
		if err := a.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	ok := &App{EmbeddedNATS: &EmbeddedNATS{Host: "::1", Port: 4222}, RoutingConfig: RoutingConfig{Media: &MediaConfig{AllowCIDRs: []string{"10.0.0.0/8"}, AllowAddrs: []string{"10.0.0.1:443"}}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

// TestHandlerWaitsForAppStart: requests that arrive before the app started (a reload can start
// the new HTTP server first) wait for it instead of routing without the worker list.
func TestHandlerWaitsForAppStart(t *testing.T) {
	a := &App{started: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		a.waitStarted(context.Background(), time.Minute)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("waitStarted returned before the app started")
	case <-time.After(50 * time.Millisecond):
	}
	a.markStarted()
	a.markStarted() // idempotent
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("waitStarted did not return after the app started")
	}
	// A started app does not wait at all, and a cancelled request stops waiting.
	a.waitStarted(context.Background(), time.Minute)
	b := &App{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.waitStarted(ctx, time.Minute)
}
