package caddymodule

import (
	"net"
	"testing"

	"go.uber.org/zap"
)

// TestNATSStateStartFailures: a failing start returns its error (field report from a user test:
// the cleanup used to run on a nil state and panic, which also wedged `caddy reload`).
func TestNATSStateStartFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	for name, cfg := range map[string]natsConfig{
		"embedded port taken":   {host: "127.0.0.1", port: busy},
		"embedded not loopback": {host: "0.0.0.0", port: -1},
		"url not a url":         {url: "notaurl"},
	} {
		st, err := newNATSState(cfg, zap.NewNop())
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
