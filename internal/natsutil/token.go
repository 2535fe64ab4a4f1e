package natsutil

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// TokenFileEnv names the environment variable local clients (kvroute-bridge, kvroute-sim) read the
// embedded server's token file path from when no flag gives it.
const TokenFileEnv = "KVROUTE_NATS_TOKEN_FILE"

// DefaultTokenFile is where the embedded NATS server listening on port writes its token when no
// token_file is configured: $XDG_CONFIG_HOME/kvroute/nats-<port>.token (~/.config/... when unset),
// or the temporary directory when the user has no config directory. Local clients of the same
// user find it there by the port of their NATS URL.
func DefaultTokenFile(port int) string {
	dir, err := os.UserConfigDir()
	if err != nil || dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "kvroute", "nats-"+strconv.Itoa(port)+".token")
}

// NewToken returns a random token: 32 hex digits (128 bits).
func NewToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating NATS token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// WriteTokenFile writes tok to path with mode 0600 (its folder created 0700 if missing) through a
// rename, so a reader never sees half a token.
func WriteTokenFile(path, tok string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating token folder: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".nats-token-*")
	if err != nil {
		return fmt.Errorf("writing token file: %w", err)
	}
	defer os.Remove(f.Name())
	if err = f.Chmod(0o600); err == nil {
		_, err = f.WriteString(tok + "\n")
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing token file %s: %w", path, err)
	}
	return nil
}

// readToken returns the token in file, trimmed; "" when it cannot be read.
func readToken(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// localTokenFile returns the token file a client of urls uses when none is configured: the
// TokenFileEnv variable, else the DefaultTokenFile of the first loopback URL's port, whether or
// not it exists yet: a worker started before the router finds the file the router writes when it
// starts (the token is read at every connect attempt; a missing file sends no token, which a
// server without auth accepts). "" for other URLs (no token is sent). URLs that carry their own
// credentials get none.
func localTokenFile(urls string) string {
	if strings.Contains(urls, "@") {
		return ""
	}
	if f := os.Getenv(TokenFileEnv); f != "" {
		return f
	}
	for _, s := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Port() == "" {
			continue
		}
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			continue
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			continue
		}
		return DefaultTokenFile(port)
	}
	return ""
}
