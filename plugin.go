// Package kvroute is the Caddy plugin entry point: importing it (as xcaddy does with
// `--with github.com/kvroute/kvroute`) registers every kvroute Caddy module (see caddymodule).
package kvroute

import (
	_ "github.com/kvroute/kvroute/caddymodule"
)
