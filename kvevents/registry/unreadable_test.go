package registry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/registry"
)

// TestUnreadableLogsNewCause: while the registry cannot be opened, the watcher warns when the
// outage starts and again when its cause changes (NATS not connected yet → JetStream not enabled),
// never at each retry of the same cause. It used to warn once, so an operator saw only the first
// cause of an outage whose real cause came later (operator test: an external NATS without
// JetStream showed "NATS not connected yet" forever).
func TestUnreadableLogsNewCause(t *testing.T) {
	var calls atomic.Int32
	open := func(context.Context) (jetstream.KeyValue, error) {
		if calls.Add(1) <= 2 {
			return nil, errors.New("NATS not connected yet")
		}
		return nil, errors.New("JetStream is not enabled on the NATS server")
	}
	core, logs := observer.New(zapcore.WarnLevel)
	w := registry.NewWatcherOpen(open, &registry.WatcherConfig{Logger: zap.New(core)})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wait.For(t, "five open attempts", func() bool { return calls.Load() >= 5 })
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message+": "+e.ContextMap()["error"].(string))
	}
	want := []string{
		"worker registry unavailable; keeping the last known workers until it can be read: NATS not connected yet",
		"worker registry still unavailable, for another reason now: JetStream is not enabled on the NATS server",
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("warnings %q, want %q", got, want)
	}
	if !w.Degraded() || w.Outages() != 1 {
		t.Fatalf("degraded %v outages %d, want one outage", w.Degraded(), w.Outages())
	}
}
