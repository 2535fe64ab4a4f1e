package caddytest

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// DialRetryingReset dials like net.Dialer, and dials again (up to 5 times, 20 ms apart) when the
// connect itself is reset. Caddy binds its listeners with SO_REUSEPORT (caddy listen_unix.go,
// v2.11): a reload binds a new socket and closes the old one, and a connection the kernel had
// queued on the old socket is reset. Nothing was sent on such a connection, so dialing again is
// what a real client's retry does; tests that reload Caddy and keep sending use this so they
// test kvroute, not that race.
func DialRetryingReset(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	for attempt := 0; ; attempt++ {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil || attempt == 4 || !errors.Is(err, syscall.ECONNRESET) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
