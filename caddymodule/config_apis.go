package caddymodule

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/kvroute/kvroute/kvevents/respmap"
	"github.com/kvroute/kvroute/routing/apis"
)

// APIsConfig holds the workers' settings for the agent APIs (/v1/responses, /v1/messages; DESIGN.md
// §1.1) and the bounds of the stored-response map. The first three must match the workers' vLLM
// settings: they change the prompt vLLM builds.
type APIsConfig struct {
	// AnthropicInlineSystem is vLLM's `inline_system` as the workers resolve it: "preserve" (system
	// messages inside `messages` stay in place) or "fold" (merged into a neighbouring message).
	// vLLM's "auto" probes the chat template at start; set the value its log line reports.
	// Default: preserve.
	AnthropicInlineSystem string `json:"anthropic_inline_system,omitempty"`

	// AnthropicDisabledThinkingEffort is the reasoning_effort vLLM gives `thinking: {"type":
	// "disabled"}`: "none" or "low" (vLLM's "auto" probe picks low when the template ignores or
	// rejects none). Default: none.
	AnthropicDisabledThinkingEffort string `json:"anthropic_disabled_thinking_effort,omitempty"`

	// ResponsesStore says the workers run with VLLM_ENABLE_RESPONSES_API_STORE=1: without it vLLM
	// refuses `background: true`, and such a request routes on load alone (api_request_invalid).
	// Default: false.
	ResponsesStore bool `json:"responses_store,omitempty"`

	// ResponseTTL is how long a stored response's worker is remembered (locally and in the
	// `kvroute_responses` bucket, whose max age it sets when kvroute creates it). Default: 24h.
	ResponseTTL caddy.Duration `json:"response_ttl,omitempty"`

	// MaxResponses bounds the stored responses one replica keeps in memory (least recently used
	// first out; the bucket still has the others). Default: 100000.
	MaxResponses int `json:"max_responses,omitempty"`
}

// options returns the router's view.
func (c *APIsConfig) options() apis.Options {
	if c == nil {
		return apis.Options{}
	}
	return apis.Options{
		Anthropic: apis.AnthropicOptions{InlineSystem: c.AnthropicInlineSystem, DisabledThinkingEffort: c.AnthropicDisabledThinkingEffort},
		Responses: apis.ResponsesOptions{StoreEnabled: c.ResponsesStore},
	}
}

func (c *APIsConfig) ttl() time.Duration {
	if c == nil || c.ResponseTTL <= 0 {
		return respmap.DefaultTTL
	}
	return time.Duration(c.ResponseTTL)
}

func (c *APIsConfig) maxResponses() int {
	if c == nil || c.MaxResponses <= 0 {
		return respmap.DefaultMaxLocal
	}
	return c.MaxResponses
}

func (c *APIsConfig) validate() error {
	if c == nil {
		return nil
	}
	switch c.AnthropicInlineSystem {
	case "", "preserve", "fold":
	default:
		return fmt.Errorf("apis anthropic_inline_system must be preserve or fold, not %q", c.AnthropicInlineSystem)
	}
	switch c.AnthropicDisabledThinkingEffort {
	case "", "none", "low":
	default:
		return fmt.Errorf("apis anthropic_disabled_thinking_effort must be none or low, not %q", c.AnthropicDisabledThinkingEffort)
	}
	if c.ResponseTTL < 0 || c.MaxResponses < 0 {
		return fmt.Errorf("apis response_ttl and max_responses must not be negative")
	}
	return nil
}

// unmarshalCaddyfile parses the `apis` block:
//
//	apis {
//	    anthropic_inline_system            preserve|fold
//	    anthropic_disabled_thinking_effort none|low
//	    responses_store                    on|off
//	    response_ttl                       <duration>
//	    max_responses                      <n>
//	}
func (c *APIsConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := seenOptions{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := seen.once(d, "apis"); err != nil {
			return err
		}
		var err error
		switch d.Val() {
		case "anthropic_inline_system":
			err = oneArg(d, stringInto(&c.AnthropicInlineSystem))
		case "anthropic_disabled_thinking_effort":
			err = oneArg(d, stringInto(&c.AnthropicDisabledThinkingEffort))
		case "responses_store":
			err = oneArg(d, func(s string) error {
				switch s {
				case "on":
					c.ResponsesStore = true
				case "off":
					c.ResponsesStore = false
				default:
					return d.Errf("responses_store must be on or off, not %q", s)
				}
				return nil
			})
		case "response_ttl":
			err = oneArg(d, func(s string) error {
				v, err := caddy.ParseDuration(s)
				if err != nil || v <= 0 {
					return d.Errf("response_ttl: %q is not a positive duration", s)
				}
				c.ResponseTTL = caddy.Duration(v)
				return nil
			})
		case "max_responses":
			err = oneArg(d, positiveIntInto(d, &c.MaxResponses))
		default:
			err = d.Errf("unrecognized apis option '%s'", d.Val())
		}
		if err != nil {
			return err
		}
	}
	return c.validate()
}
