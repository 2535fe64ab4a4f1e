package snapshot_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/kvevents/codec"
	"github.com/kvroute/kvroute/kvevents/snapshot"
)

// TestChunksUnderBridgePermissions: with the per-worker permissions of docs/deploy-vllm.md §5, a
// bridge user answers a many-chunk snapshot when its allow_responses has max -1; with the default
// (one response) the router sees the answer cut after the first chunk and the snapshot fails.
func TestChunksUnderBridgePermissions(t *testing.T) {
	set := setOf(3000)
	for _, tc := range []struct {
		name string
		resp *server.ResponsePermission
		ok   bool
	}{
		{"max -1", &server.ResponsePermission{MaxMsgs: -1, Expires: 5 * time.Minute}, true},
		{"default", &server.ResponsePermission{MaxMsgs: server.DEFAULT_ALLOW_RESPONSE_MAX_MSGS, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true, Users: []*server.User{
				{Username: "router", Password: "r", Permissions: &server.Permissions{
					Publish:   &server.SubjectPermission{Allow: []string{"kvroute.ctl.*.replay", "kvroute.ctl.*.snapshot"}},
					Subscribe: &server.SubjectPermission{Allow: []string{"kvroute.events.*", "_INBOX.>"}},
				}},
				{Username: "bridge-w", Password: "b", Permissions: &server.Permissions{
					Publish:   &server.SubjectPermission{Allow: []string{"kvroute.events.w"}},
					Subscribe: &server.SubjectPermission{Allow: []string{"kvroute.ctl.w.replay", "kvroute.ctl.w.snapshot"}},
					Response:  tc.resp,
				}},
			}}
			srv, err := server.NewServer(opts)
			if err != nil {
				t.Fatal(err)
			}
			go srv.Start()
			if !srv.ReadyForConnections(5 * time.Second) {
				t.Fatal("nats server not ready")
			}
			defer srv.Shutdown()
			bridge, err := nats.Connect(srv.ClientURL(), nats.UserInfo("bridge-w", "b"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
			if err != nil {
				t.Fatal(err)
			}
			defer bridge.Close()
			router, err := nats.Connect(srv.ClientURL(), nats.UserInfo("router", "r"))
			if err != nil {
				t.Fatal(err)
			}
			defer router.Close()
			sub, err := bridge.Subscribe("kvroute.ctl.w.snapshot", func(m *nats.Msg) {
				a := snapshot.Answer{View: set.Order(), Seq: 9, Complete: true, Encoding: codec.VLLM, MaxChunkBytes: 16 << 10}
				_ = snapshot.Respond(bridge, m.Reply, &a)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			_ = bridge.Flush()
			chunks, blocks := 0, 0
			err = snapshot.Fetch(context.Background(), router, "kvroute.ctl.w.snapshot", 0, snapshot.FetchConfig{Idle: 2 * time.Second},
				func(c snapshot.Chunk) error {
					chunks++
					if c.Last {
						blocks = c.Blocks
					}
					return nil
				})
			switch {
			case tc.ok && (err != nil || blocks != 3000 || chunks < 10):
				t.Fatalf("snapshot: %d chunks, %d blocks, err %v; want every chunk, 3000 blocks", chunks, blocks, err)
			case !tc.ok && (!errors.Is(err, snapshot.ErrSnapshot) || chunks != 1):
				t.Fatalf("snapshot under a one-response permission: %d chunks, err %v; want it cut after chunk 0", chunks, err)
			}
		})
	}
}
