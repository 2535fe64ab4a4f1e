package subscriber_test

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/subscriber"
	"github.com/kvroute/kvroute/routing/router"
)

// Example shows the wiring the kvroute app does: one Subscriber per NATS connection and index
// (kept across config reloads with them), the worker set pushed on every registry change, the
// layout verification hook pointed at the router, counters fed to the events metric.
func Example() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		return
	}
	defer nc.Close()
	ix, _ := index.New(nil)
	sub, err := subscriber.New(&subscriber.Config{
		OnCount: func(worker, result string, n uint64) {
			// eventsTotal.WithLabelValues(worker, result).Add(float64(n))
		},
	}, nc, ix)
	if err != nil {
		return
	}
	var r *router.Router // the app's router
	if r != nil {
		sub.SetOnStored(r.VerifyStored)
	}
	sub.SetWorkers([]registry.Worker{{WorkerID: "w1", Endpoint: "10.0.0.1:8000", Model: "m", Engine: "vllm", BlockSize: 16, DPSize: 1}})
	if err := sub.Start(context.Background()); err != nil {
		return
	}
	defer sub.Stop()
	if ws, ok := sub.Worker("w1"); ok {
		fmt.Println(ws.Blocks, ws.LastSeq) // /kvroute/workers "blocks", "last_seq"
	}
	_ = sub.Stats().Events // /kvroute/stats "events"
}
