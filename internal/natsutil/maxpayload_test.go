package natsutil_test

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/internal/natsutil"
)

// TestSmallMaxPayloadWarned: a server with a stock nats-server's max_payload (1 MiB) is named in
// a warning when connected (found by an operator test: a 8161-block prompt's KV-event batch was
// refused with "maximum payload exceeded"); the embedded server's 8 MiB is not.
func TestSmallMaxPayloadWarned(t *testing.T) {
	for _, tc := range []struct {
		maxPayload int32
		warned     bool
	}{{1 << 20, true}, {natsutil.RecommendedMaxPayload, false}} {
		s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true, MaxPayload: tc.maxPayload})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		if !s.ReadyForConnections(5e9) {
			t.Fatal("nats-server not ready")
		}
		core, logs := observer.New(zap.WarnLevel)
		nc, err := natsutil.Connect(s.ClientURL(), &natsutil.ConnectConfig{Name: "test", Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		got := logs.FilterMessageSnippet("max_payload").All()
		if (len(got) == 1) != tc.warned || len(got) > 1 {
			t.Errorf("max_payload %d: %d warnings, want warned=%v", tc.maxPayload, len(got), tc.warned)
		}
		if tc.warned && len(got) == 1 && got[0].ContextMap()["max_payload"] != "1.0 MiB" {
			t.Errorf("warning fields %v", got[0].ContextMap())
		}
		nc.Close()
		s.Shutdown()
		s.WaitForShutdown()
	}
}
