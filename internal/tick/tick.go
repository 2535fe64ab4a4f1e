// Package tick runs the periodic work of kvroute's background loops (health probes, load sync,
// registry heartbeats).
package tick

import (
	"context"
	"time"
)

// Every calls fn every interval (> 0) until ctx is done; the first call comes one interval after
// the start. It returns when ctx is done, after a running fn returns.
func Every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
