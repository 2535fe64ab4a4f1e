package bridge_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	zmq "github.com/pebbe/zmq4"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/natsutil"
	"github.com/kvroute/kvroute/internal/testkit/natstest"
	"github.com/kvroute/kvroute/internal/testkit/wait"
	"github.com/kvroute/kvroute/kvevents/bridge"
	"github.com/kvroute/kvroute/kvevents/wire"
)

// BenchmarkForward measures the whole path ZMQ PUB → bridge → NATS → a subscriber on loopback, with
// realistic vLLM batches (1–3 events of 1–3 blocks of 16 tokens): ns/op is per batch, MB/s counts
// payload bytes. Batches the bridge misses under load are filled from the replay socket, so every run
// ends with all b.N batches delivered.
func BenchmarkForward(b *testing.B) {
	srv := natstest.Start(b)
	nc, err := natsutil.Connect(srv.ClientURL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	rc, err := natsutil.Connect(srv.ClientURL(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	zctx, err := zmq.NewContext()
	if err != nil {
		b.Fatal(err)
	}
	defer zctx.Term()
	pubPort, replayPort := freeTCPPair(b), freeTCPPair(b)
	eng := startEngine(b, zctx, tcpEP(pubPort), tcpEP(replayPort), true)
	defer eng.closeSockets()

	var got atomic.Int64
	sub, err := rc.Subscribe(wire.EventsSubject("w1"), func(*nats.Msg) { got.Add(1) })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	if err := rc.Flush(); err != nil {
		b.Fatal(err)
	}
	cfg := oneWorker(pubPort, replayPort)
	cfg.DisableRegistration = true
	cfg.Logger = zap.NewNop()
	br, err := bridge.New(nc, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer br.Stop(context.Background())
	eng.waitSubscribed()

	gen := newEventGen(99, 16)
	payloads := make([][]byte, 256)
	size := 0
	for i := range payloads {
		payloads[i] = gen.batch(b, i, 0)
		size += len(payloads[i])
	}
	b.SetBytes(int64(size / len(payloads)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		eng.publish(payloads[i%len(payloads)], false)
	}
	wait.For(b, "all batches delivered", func() bool { return got.Load() >= int64(b.N) })
	b.StopTimer()
	s := br.Stats()[0]
	b.ReportMetric(float64(s.Filled), "filled")
}
