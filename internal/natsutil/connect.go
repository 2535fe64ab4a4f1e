package natsutil

import (
	"cmp"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/kvroute/kvroute/internal/defaults"
)

// ConnectConfig configures Connect; nil means defaults.
type ConnectConfig struct {
	// Name is the client connection name shown by the server (e.g. "kvroute", "kvroute-sim w1").
	Name string
	// Timeout of the initial connect. Default: 5 s.
	Timeout time.Duration
	// ReconnectWait between reconnect attempts. Default: 1 s.
	ReconnectWait time.Duration
	// Options are added after kvroute's own (credentials, TLS).
	Options []nats.Option
	// Logger receives connection state changes. Default: a no-op logger.
	Logger *zap.Logger
	// Background returns the connection at once when no server answers yet (nats.go
	// RetryOnFailedConnect): it connects in the background with ReconnectWait between attempts,
	// subscriptions made meanwhile are sent when it connects, and publishes are buffered. A
	// process that starts with or before its NATS cluster (a machine booting both) then keeps
	// running instead of exiting. Default: false (the first connect's error is returned).
	Background bool
	// TokenFile holds the token of a server that requires one (kvroute's embedded server); it is
	// read again at every (re)connect, so a restarted router's new token is picked up. Default:
	// the TokenFileEnv variable, else DefaultTokenFile of a loopback URL's port when it exists.
	TokenFile string
}

// Connect opens a NATS connection to url that reconnects forever (the embedded server or a
// cluster may restart) and logs disconnects, reconnects, closes and asynchronous errors. A url
// CheckURLs refuses is an error at once, also with Background (it could never connect).
func Connect(url string, cfg *ConnectConfig) (*nats.Conn, error) {
	if err := CheckURLs(url); err != nil {
		return nil, fmt.Errorf("NATS URL list: %w", err)
	}
	var c ConnectConfig
	if cfg != nil {
		c = *cfg
	}
	c.Name = cmp.Or(c.Name, "kvroute")
	defaults.Positive(&c.Timeout, 5*time.Second)
	defaults.Positive(&c.ReconnectWait, time.Second)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.TokenFile == "" {
		c.TokenFile = localTokenFile(url)
	}
	log := c.Logger
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.Timeout(c.Timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(c.ReconnectWait),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			log.Warn("nats disconnected", zap.String("url", nc.ConnectedUrlRedacted()), zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", zap.String("url", nc.ConnectedUrlRedacted()))
			warnSmallMaxPayload(log, nc) // another server of a cluster may be configured otherwise
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			log.Info("nats connection closed")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Error("nats async error", zap.String("subject", subj), zap.Error(err))
		}),
	}
	if c.TokenFile != "" {
		file := c.TokenFile
		opts = append(opts, nats.TokenHandler(func() string { return readToken(file) }))
	}
	if c.Background {
		// A refused token is not final in the background: the router may not have written its
		// token file yet (a worker started first) or may be restarting with a new one, and the
		// token is read again at every attempt. nats.go closes the connection for good after the
		// same authorization error twice unless told otherwise (IgnoreAuthErrorAbort); the refusal
		// is logged with the token hint, at most once per authLogEvery.
		var lastAuthLog time.Time
		opts = append(opts, nats.RetryOnFailedConnect(true), nats.IgnoreAuthErrorAbort(),
			nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
				if !isAuthError(err) || time.Since(lastAuthLog) < authLogEvery {
					return
				}
				lastAuthLog = time.Now()
				log.Warn("nats refused the connection; retrying", zap.Error(err), zap.String("hint", tokenHint(c.TokenFile)))
			}),
			nats.ConnectHandler(func(nc *nats.Conn) {
				log.Info("nats connected", zap.String("url", nc.ConnectedUrlRedacted()))
				warnSmallMaxPayload(log, nc)
			}))
	}
	opts = append(opts, c.Options...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) {
			return nil, fmt.Errorf("connecting to NATS: %w (%s)", err, tokenHint(c.TokenFile))
		}
		return nil, fmt.Errorf("connecting to NATS: %w", err)
	}
	if !nc.IsConnected() {
		log.Warn("nats not reachable yet; connecting in the background", zap.String("url", RedactURLs(url)))
		return nc, nil
	}
	if !c.Background { // the ConnectHandler logs it
		log.Info("nats connected", zap.String("url", nc.ConnectedUrlRedacted()))
		warnSmallMaxPayload(log, nc)
	}
	return nc, nil
}

// authLogEvery spaces the log lines of a background connect the server keeps refusing.
const authLogEvery = 30 * time.Second

// isAuthError reports whether err is the server refusing the client's credentials.
func isAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		(err != nil && strings.Contains(strings.ToLower(err.Error()), "authorization violation"))
}

// tokenHint says which token a refused client sent, for the error an operator reads: kvroute's
// embedded server requires the token it writes to a file (DefaultTokenFile by port, or its
// token_file), and a client started with another $XDG_CONFIG_HOME or user finds none.
func tokenHint(file string) string {
	switch {
	case file == "":
		return "no token file found for this URL: pass --nats-token-file or set " + TokenFileEnv + " to the router's token file"
	case readToken(file) == "":
		return "the token file " + file + " is missing or empty: pass --nats-token-file or set " + TokenFileEnv + " to the router's token file"
	default:
		return "the token in " + file + " was refused: is it the running router's (it writes a new one at each start)?"
	}
}

// RedactURLs returns a NATS URL list without user information (a token or password in a URL).
func RedactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = nil
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
