package caddymodule

import (
	"math"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/kvroute/kvroute/routing/mediaport"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// unmarshalRoutingOption parses one routing subdirective of the `kvroute` global option; it
// reports false for a subdirective it does not know. Syntax:
//
//	model_dir         <dir>
//	frontend_decoding on|off
//	max_media         <n>
//	max_messages      <n>
//	max_parts         <n>
//	tokenize_cache_size <size>
//	template_cache_size <size>
//	media {
//	    allow_loopback
//	    allow_private
//	    allow_addr      <ip:port...>
//	    allow_cidr      <cidr...>
//	    allowed_domains <host|*.suffix...>
//	    file_root       <dir>
//	    max_bytes       <size>
//	    fetch_timeout   <duration>
//	    max_frame_size  <width> <height>
//	    max_decoded_frames <n>
//	    max_rgb_bytes   <size>
//	    decode_timeout  <duration>
//	    decode_slots    <n>
//	    slot_wait       <duration>
//	    max_inflight_bytes <size>
//	    image_identity pixels|bytes
//	}
//	scheduler {
//	    prefill_load_scale        <float>
//	    overlap_credit            <float>
//	    temperature               <float>
//	    max_active_prefill_tokens <n>
//	    max_active_decode_blocks  <n>
//	}
//	index {
//	    max_blocks_per_worker <n>
//	    max_blocks            <n>
//	}
//	apis { ... }   (config_apis.go)
func (rc *RoutingConfig) unmarshalRoutingOption(d *caddyfile.Dispenser) (bool, error) {
	switch d.Val() {
	case "model_dir":
		if rc.ModelDir != "" {
			return true, d.Err("model_dir already specified")
		}
		return true, oneArg(d, stringInto(&rc.ModelDir))
	case "frontend_decoding":
		if rc.FrontendDecoding != nil {
			return true, d.Err("frontend_decoding already specified")
		}
		return true, oneArg(d, func(s string) error {
			switch s {
			case "on":
				t := true
				rc.FrontendDecoding = &t
			case "off":
				f := false
				rc.FrontendDecoding = &f
			default:
				return d.Errf("frontend_decoding must be on or off, not %q", s)
			}
			return nil
		})
	case "max_media":
		return true, oneArg(d, positiveIntInto(d, &rc.MaxMedia))
	case "max_messages":
		return true, oneArg(d, positiveIntInto(d, &rc.MaxMessages))
	case "max_parts":
		return true, oneArg(d, positiveIntInto(d, &rc.MaxParts))
	case "tokenize_cache_size":
		if rc.TokenizeCacheSize != nil {
			return true, d.Err("tokenize_cache_size already specified")
		}
		rc.TokenizeCacheSize = new(int64)
		return true, oneArg(d, sizeInto(d, rc.TokenizeCacheSize))
	case "template_cache_size":
		if rc.TemplateCacheSize != nil {
			return true, d.Err("template_cache_size already specified")
		}
		rc.TemplateCacheSize = new(int64)
		return true, oneArg(d, sizeInto(d, rc.TemplateCacheSize))
	case "media":
		if rc.Media != nil {
			return true, d.Err("media already specified")
		}
		rc.Media = new(MediaConfig)
		return true, rc.Media.unmarshalCaddyfile(d)
	case "scheduler":
		if rc.Scheduler != nil {
			return true, d.Err("scheduler already specified")
		}
		rc.Scheduler = scheduler.DefaultConfig()
		return true, unmarshalScheduler(d, rc.Scheduler)
	case "apis":
		if rc.APIs != nil {
			return true, d.Err("apis already specified")
		}
		rc.APIs = new(APIsConfig)
		return true, rc.APIs.unmarshalCaddyfile(d)
	case "index":
		if rc.Index != nil {
			return true, d.Err("index already specified")
		}
		rc.Index = new(IndexConfig)
		seen := seenOptions{}
		for nesting := d.Nesting(); d.NextBlock(nesting); {
			if err := seen.once(d, "index"); err != nil {
				return true, err
			}
			var err error
			switch d.Val() {
			case "max_blocks_per_worker":
				err = oneArg(d, positiveIntInto(d, &rc.Index.MaxBlocksPerWorker))
			case "max_blocks":
				err = oneArg(d, positiveIntInto(d, &rc.Index.MaxBlocks))
			default:
				err = d.Errf("unrecognized index option '%s'", d.Val())
			}
			if err != nil {
				return true, err
			}
		}
		return true, nil
	}
	return false, nil
}

func (m *MediaConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := seenOptions{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := seen.once(d, "media", "codecs", "allow_addr", "allow_cidr", "allowed_domains"); err != nil {
			return err
		}
		var err error
		switch d.Val() {
		case "codecs":
			if m.Codecs, err = appendArgs(d, m.Codecs); err == nil {
				if _, perr := mediaport.ParseCodecs(m.Codecs); perr != nil {
					err = d.Errf("%v", perr)
				}
			}
		case "allow_loopback":
			m.AllowLoopback = true
			err = noArgs(d)
		case "allow_private":
			m.AllowPrivate = true
			err = noArgs(d)
		case "allow_addr":
			m.AllowAddrs, err = appendArgs(d, m.AllowAddrs)
		case "allow_cidr":
			m.AllowCIDRs, err = appendArgs(d, m.AllowCIDRs)
		case "allowed_domains":
			m.AllowedDomains, err = appendArgs(d, m.AllowedDomains)
		case "file_root":
			err = oneArg(d, stringInto(&m.FileRoot))
		case "max_bytes":
			err = oneArg(d, sizeInto(d, &m.MaxBytes))
		case "fetch_timeout":
			err = oneArg(d, durationInto(d, &m.FetchTimeout))
		case "max_frame_size":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.ArgErr()
			}
			if err = positiveIntInto(d, &m.MaxFrameWidth)(args[0]); err == nil {
				err = positiveIntInto(d, &m.MaxFrameHeight)(args[1])
			}
		case "max_decoded_frames":
			err = oneArg(d, positiveIntInto(d, &m.MaxDecodedFrames))
		case "max_rgb_bytes":
			err = oneArg(d, sizeInto(d, &m.MaxRGBBytes))
		case "decode_timeout":
			err = oneArg(d, durationInto(d, &m.DecodeTimeout))
		case "decode_slots":
			err = oneArg(d, positiveIntInto(d, &m.DecodeSlots))
		case "slot_wait":
			err = oneArg(d, durationInto(d, &m.SlotWait))
		case "max_inflight_bytes":
			err = oneArg(d, sizeInto(d, &m.MaxInflightBytes))
		case "image_identity":
			err = m.unmarshalImageIdentity(d)
		default:
			err = d.Errf("unrecognized media option '%s'", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func unmarshalScheduler(d *caddyfile.Dispenser, c *scheduler.Config) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := seenOptions{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := seen.once(d, "scheduler"); err != nil {
			return err
		}
		var err error
		switch d.Val() {
		case "cost":
			err = oneArg(d, func(v string) error {
				if v != scheduler.CostTTFT && v != scheduler.CostLinear && v != scheduler.CostTTFT2 {
					return d.Errf("cost must be %s, %s or %s, not %q", scheduler.CostTTFT2, scheduler.CostTTFT, scheduler.CostLinear, v)
				}
				c.CostModel = v
				return nil
			})
		case "max_running":
			err = oneArg(d, int64Into(d, &c.MaxRunning))
		case "queue_wait_tokens":
			err = oneArg(d, floatAtLeast(d, &c.QueueWaitTokens, true))
		case "balance_factor":
			err = oneArg(d, func(v string) error {
				if v == "off" {
					c.BalanceFactor = -1
					return nil
				}
				f, perr := strconv.ParseFloat(v, 64)
				if perr != nil || !(f >= 1) || math.IsInf(f, 0) { // !(f >= 1) also rejects NaN
					return d.Errf("balance_factor: %q is not off or a number >= 1", v)
				}
				c.BalanceFactor = f
				return nil
			})
		case "balance_window":
			err = oneArg(d, positiveIntInto(d, &c.BalanceWindow))
		case "prefill_load_scale":
			err = oneArg(d, floatInto(d, &c.PrefillLoadScale))
		case "overlap_credit":
			err = oneArg(d, floatInto(d, &c.OverlapCredit))
		case "temperature":
			err = oneArg(d, floatInto(d, &c.Temperature))
		case "max_active_prefill_tokens":
			err = oneArg(d, int64Into(d, &c.MaxActivePrefillTokens))
		case "max_active_decode_blocks":
			err = oneArg(d, int64Into(d, &c.MaxActiveDecodeBlocks))
		case "affinity":
			err = oneArg(d, func(v string) error {
				if v != "on" && v != "off" {
					return d.Errf("affinity must be on or off, not %q", v)
				}
				c.AffinityOff = v == "off"
				return nil
			})
		default:
			err = d.Errf("unrecognized scheduler option '%s'", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// oneArg reads exactly one argument and hands it to set.
func oneArg(d *caddyfile.Dispenser, set func(string) error) error {
	v, err := singleArg(d)
	if err != nil {
		return err
	}
	return set(v)
}

// singleArg reads exactly one argument.
func singleArg(d *caddyfile.Dispenser) (string, error) {
	if !d.NextArg() {
		return "", d.ArgErr()
	}
	v := d.Val()
	if d.NextArg() {
		return "", d.ArgErr()
	}
	return v, nil
}

// stringInto stores the argument in p as it is.
func stringInto(p *string) func(string) error {
	return func(s string) error { *p = s; return nil }
}

func noArgs(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func appendArgs(d *caddyfile.Dispenser, to []string) ([]string, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return to, d.ArgErr()
	}
	return append(to, args...), nil
}

// positiveIntInto parses a limit whose zero value in the JSON config means "the default": 0 in a
// Caddyfile would be dropped by the adapter (omitempty) and silently become the default, so it is
// refused here with the reason.
func positiveIntInto(d *caddyfile.Dispenser, p *int) func(string) error {
	name := d.Val() // the option name: the closure runs after the argument is read
	return func(s string) error {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			return d.Errf("%s: %q is not a positive integer (0 is not a limit here; leave the option out for the default)", name, s)
		}
		*p = v
		return nil
	}
}

func int64Into(d *caddyfile.Dispenser, p *int64) func(string) error {
	name := d.Val() // the option name: the closure runs after the argument is read
	return func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return d.Errf("%s: %q is not a non-negative integer", name, s)
		}
		*p = v
		return nil
	}
}

func floatInto(d *caddyfile.Dispenser, p *float64) func(string) error {
	return floatAtLeast(d, p, false)
}

// floatAtLeast parses a finite float >= 0, or > 0 when positive is set: the scheduler's floats
// are refused below 0 when the config is provisioned, which names no file and line, and a 0 whose
// JSON means the default (queue_wait_tokens) would silently become it (operator test).
func floatAtLeast(d *caddyfile.Dispenser, p *float64, positive bool) func(string) error {
	name := d.Val() // the option name: the closure runs after the argument is read
	return func(s string) error {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			// ParseFloat takes NaN and Inf, which JSON cannot carry: the adapted config would
			// hold a null app and fail with no option named (operator test).
			return d.Errf("%s: %q is not a finite number", name, s)
		}
		if v < 0 {
			return d.Errf("%s: %q is below 0", name, s)
		}
		if positive && v == 0 {
			return d.Errf("%s: %q is not a positive number (0 is not a value here; leave the option out for the default)", name, s)
		}
		*p = v
		return nil
	}
}

// sizeInto parses a byte size such as 256MiB or 64MB (go-humanize).
func sizeInto(d *caddyfile.Dispenser, p *int64) func(string) error {
	name := d.Val() // the option name: the closure runs after the argument is read
	return func(s string) error {
		v, err := humanize.ParseBytes(s)
		if err != nil || v > 1<<62 {
			return d.Errf("%s: %q is not a byte size", name, s)
		}
		*p = int64(v)
		return nil
	}
}

func durationInto(d *caddyfile.Dispenser, p *caddy.Duration) func(string) error {
	name := d.Val() // the option name: the closure runs after the argument is read
	return func(s string) error {
		v, err := caddy.ParseDuration(s)
		if err != nil || v < 0 {
			return d.Errf("%s: %q is not a duration", name, s)
		}
		*p = caddy.Duration(v)
		return nil
	}
}
