// Command cmd is Caddy with the standard modules and the kvroute plugin, what xcaddy builds for
// an operator, for integration tests that need a second Caddy process (caddybin.Build): one
// process holds one Caddy instance, and kvroute keeps process-wide state (the stored-response
// map, caches) that only a separate process does not share.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/kvroute/kvroute"
)

func main() { caddycmd.Main() }
