// Package natstest starts the NATS servers of tests: one embedded kvroute NATS server (JetStream on,
// loopback, a random port, its store in the test's temporary folder) per call, shut down when the
// test ends; and opens the worker registry bucket over a test's connection. Tests that need a particular server (authentication, a cluster, a fixed port to
// restart on) configure natsutil or nats-server themselves. Only tests import it.
package natstest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// Start starts an embedded NATS server on a random loopback port with JetStream stored under
// tb.TempDir(); it shuts down when the test (or benchmark) ends. A start error fails the test.
func Start(tb testing.TB) *natsutil.Embedded {
	tb.Helper()
	srv, err := natsutil.StartEmbedded(&natsutil.EmbeddedConfig{Port: natsutil.RandomPort, StoreDir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("starting embedded NATS: %v", err)
	}
	tb.Cleanup(srv.Shutdown)
	return srv
}

// Bucket opens (creating it when missing) the worker registry bucket over nc; an error fails the
// test.
func Bucket(tb testing.TB, nc *nats.Conn) jetstream.KeyValue {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	kv, err := registry.OpenBucket(context.Background(), js)
	if err != nil {
		tb.Fatalf("opening the registry bucket: %v", err)
	}
	return kv
}
