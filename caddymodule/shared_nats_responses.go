package caddymodule

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/kvroute/kvroute/kvevents/registry"
	"github.com/kvroute/kvroute/kvevents/respmap"
)

// attachResponses opens the `kvroute_responses` bucket on this shared NATS, once, in the
// background (retrying every 5 s while JetStream cannot give it), and attaches it to m. Until then
// m works on its local level alone: a follow-up this replica did not see is unknown to it.
func (st *sharedNATS) attachResponses(m *respmap.Map, ttl time.Duration) {
	st.respOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		st.respCancel = cancel
		go func() {
			for {
				octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
				kv, err := respmap.OpenBucket(octx, st.js, registry.ClusterSize(st.nc), ttl, st.logger)
				ocancel()
				if err == nil {
					m.Attach(kv)
					st.logger.Info("stored-response bucket attached", zap.Duration("ttl", ttl))
					return
				}
				st.logger.Warn("stored-response bucket unavailable; responses are known to this replica only", zap.Error(err))
				select {
				case <-ctx.Done():
					return
				case <-time.After(5 * time.Second):
				}
			}
		}()
	})
}
