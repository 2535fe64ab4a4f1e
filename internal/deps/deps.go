//go:build deps

// Package deps pins the project's direct dependencies before every package imports them.
package deps

import (
	_ "github.com/asticode/go-astiav"
	_ "github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/dustin/go-humanize"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/pebbe/zmq4"
	_ "github.com/vmihailenco/msgpack/v5"
	_ "github.com/zeebo/xxh3"
	_ "go.uber.org/goleak"
	_ "go.uber.org/zap"
	_ "golang.org/x/text/unicode/norm"
)
