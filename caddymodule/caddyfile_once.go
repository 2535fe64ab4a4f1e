package caddymodule

import (
	"slices"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// seenOptions refuses an option given twice in one Caddyfile block. Without it the last value
// silently won: an operator test wrote `cost` twice in one `scheduler` block and ran with the
// second without a word. Options that add to a list (codecs, allow_addr, …) may repeat.
type seenOptions map[string]bool

// once records the option d is on; one seen before in this block, and not listed in repeatable,
// is an error naming the option and the block.
func (s seenOptions) once(d *caddyfile.Dispenser, block string, repeatable ...string) error {
	opt := d.Val()
	if s[opt] && !slices.Contains(repeatable, opt) {
		return d.Errf("%s option '%s' already specified", block, opt)
	}
	s[opt] = true
	return nil
}
