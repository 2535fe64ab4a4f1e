// Package natstest starts the NATS servers of tests: one embedded kvroute NATS server (JetStream on,
// loopback, a random port, its store in the test's temporary folder) per call, shut down when the
// test ends. Tests that need a particular server (authentication, a cluster, a fixed port to
// restart on) configure natsutil or nats-server themselves. Only tests import it.
package natstest

import (
	"testing"

	"github.com/kvroute/kvroute/kvevents/natsutil"
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
