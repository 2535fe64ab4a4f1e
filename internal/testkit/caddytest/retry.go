package caddytest

import (
	"errors"
	"net/http"
	"syscall"
)

// Caddy binds its listeners with SO_REUSEPORT (caddy listen_unix.go, v2.11): a config reload
// binds a new socket and closes the old one, and a connection the kernel had queued on the old
// socket is reset — at the connect, or at the first read after the request was written. The
// server never accepted such a connection, so nothing was processed; sending again is what a
// real client's retry does. Tests that reload Caddy and keep sending use these, so they test
// kvroute rather than that race (docs/operations.md, "Config reloads").

// RetryReset is an http.RoundTripper that sends a request again (up to 3 times) when its
// connection was reset before any response arrived — at the connect or at the first read — and
// the body can be replayed (GetBody).
type RetryReset struct{ Base http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (rt RetryReset) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		res, err := rt.Base.RoundTrip(req)
		if err == nil || attempt == 3 || !errors.Is(err, syscall.ECONNRESET) || (req.Body != nil && req.GetBody == nil) {
			return res, err
		}
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// CloseIdleConnections closes the base transport's idle connections (http.Client calls it).
func (rt RetryReset) CloseIdleConnections() {
	if c, ok := rt.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
