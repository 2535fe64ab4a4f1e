package natsutil

import (
	"fmt"
	neturl "net/url"
	"strconv"
	"strings"
)

// CheckURLs checks a NATS server list as Connect takes it (comma-separated seeds; an entry without
// a scheme is nats://, as nats.go reads it): every entry needs the scheme nats, tls, ws or wss, a
// host, and a port, when one is given, in 1-65535. nats.go accepts an out-of-range port at parse
// time and fails only when it dials, in the background, so a typo would otherwise pass
// `caddy validate` and leave the router waiting for a server that cannot exist. The error names the
// entry by position and without user information (a token or password in a URL is never echoed).
func CheckURLs(list string) error {
	for i, raw := range strings.Split(list, ",") { // errors: "entry N …", for the caller to prefix
		e := strings.TrimSpace(raw)
		if e == "" {
			return fmt.Errorf("entry %d is empty", i+1)
		}
		if !strings.Contains(e, "://") {
			e = "nats://" + e
		}
		u, err := neturl.Parse(e)
		if err != nil {
			return fmt.Errorf("entry %d is not a URL (want nats://host:port)", i+1)
		}
		u.User = nil
		switch strings.ToLower(u.Scheme) {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("entry %d (%s): scheme %q, want nats, tls, ws or wss", i+1, u.Redacted(), u.Scheme)
		}
		if u.Hostname() == "" {
			return fmt.Errorf("entry %d (%s) has no host", i+1, u.Redacted())
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("entry %d (%s): port %s, want 1-65535", i+1, u.Redacted(), p)
			}
		}
	}
	return nil
}
