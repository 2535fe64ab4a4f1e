// The JSON config types of the routing core (RoutingConfig, MediaConfig, IndexConfig) and what
// turns them into the core packages' configs; the App lifecycle is in app.go, the routing core and
// the decider built from them in decider.go.

package caddymodule

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/internal/defaults"
	"github.com/kvroute/kvroute/kv/index"
	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/mediaport"
	"github.com/kvroute/kvroute/routing/scheduler"
)

// RoutingConfig configures kvroute's routing core: the model whose prompts are rebuilt, the media
// pipeline, the cost function and the index. Its fields sit directly in the `kvroute` app's JSON.
type RoutingConfig struct {
	// ModelDir is the model folder the workers serve (tokenizer.json, the chat template,
	// config.json and the processor configs), read at provision time. Without it, requests are
	// routed on load alone. Placeholders are expanded. Default: none.
	ModelDir string `json:"model_dir,omitempty"`

	// FrontendDecoding decodes media at the router so identities are content-stable and video
	// can be routed exactly (DESIGN.md §1 step 3). Off, media requests fall back
	// (`frontend_decoding_off`). Default: true.
	FrontendDecoding *bool `json:"frontend_decoding,omitempty"`

	// MaxMedia caps the media items of one request; more is answered with 400 `too_many_media`.
	// Default: 32.
	MaxMedia int `json:"max_media,omitempty"`

	// MaxMessages caps the messages of one request and MaxParts the content parts of all its
	// messages together, checked while the body is decoded; more, or more than 16 JSON values per
	// allowed message and part, is answered with 400 `too_many_parts`. Default: 4096 and 8192.
	MaxMessages int `json:"max_messages,omitempty"`
	MaxParts    int `json:"max_parts,omitempty"`

	// Media configures fetching and decoding of media URLs (DESIGN.md §6). Default: the
	// DESIGN.md limits, public addresses only.
	Media *MediaConfig `json:"media,omitempty"`

	// Scheduler sets the cost function (DESIGN.md §7). Default: prefill_load_scale 1,
	// overlap_credit 1, temperature 0, no busy thresholds.
	Scheduler *scheduler.Config `json:"scheduler,omitempty"`

	// TokenizeCacheSize is the byte budget of the tokenize cache: prompt segment (the text
	// between two added tokens) → token ids, LRU, so a conversation's earlier turns are not
	// tokenized again. 0 turns it off. Default: 256 MiB.
	TokenizeCacheSize *int64 `json:"tokenize_cache_size,omitempty"`

	// TemplateCacheSize is the byte budget of the template cache: a chat message's JSON text →
	// its template values, with the rendered text of the template's loop over it, LRU, so a
	// conversation's earlier turns are neither converted nor rendered again. 0 turns it off.
	// Default: 64 MiB.
	TemplateCacheSize *int64 `json:"template_cache_size,omitempty"`

	// Index bounds the KV block index. The index survives config reloads; every config load
	// applies its bounds to it. Default: 1Mi blocks per worker, 16Mi in total.
	Index *IndexConfig `json:"index,omitempty"`

	// APIs holds the workers' settings for /v1/responses and /v1/messages and the bounds of the
	// stored-response map (config_apis.go). Default: vLLM's defaults, 24h, 100000.
	APIs *APIsConfig `json:"apis,omitempty"`
}

// MediaConfig configures the media fetcher and decoder.
type MediaConfig struct {
	// Codecs is the video codec allow-list: vp8, vp9, av1, h264, hevc. A clip of a codec not
	// listed falls back with unsupported_codec (its repeats still reach one worker: affinity).
	// H.264 and HEVC decoding may need a patent licence in some places: listing them is the
	// operator's choice. Default: vp8 vp9.
	Codecs []string `json:"codecs,omitempty"`

	// AllowLoopback lets media URLs reach loopback addresses (127.0.0.0/8, ::1). Only for
	// development and demos: on an edge router it opens the admin endpoint and local services to
	// clients. Default: false.
	AllowLoopback bool `json:"allow_loopback,omitempty"`

	// AllowPrivate lets media URLs reach private addresses (RFC 1918, fc00::/7, 100.64/10).
	// Default: false.
	AllowPrivate bool `json:"allow_private,omitempty"`

	// AllowAddrs lists exact `ip:port` endpoints that media URLs may reach even when their
	// address class is refused (e.g. one internal media server). Default: none.
	AllowAddrs []string `json:"allow_addrs,omitempty"`

	// AllowCIDRs lists address ranges media URLs may reach even when their class is refused.
	// Default: none.
	AllowCIDRs []string `json:"allow_cidrs,omitempty"`

	// AllowedDomains, when set, is the only hosts media URLs may name: exact names or
	// `*.suffix`. Default: any public host.
	AllowedDomains []string `json:"allowed_domains,omitempty"`

	// FileRoot allows `file:` URLs for regular files under this folder (after resolving links).
	// Default: none (`file:` refused).
	FileRoot string `json:"file_root,omitempty"`

	// MaxBytes caps a fetched media item, in bytes (413 `media_too_large`). Default: 256 MiB.
	MaxBytes int64 `json:"max_bytes,omitempty"`

	// FetchTimeout caps one fetch (400 `media_fetch_timeout`). Default: 30s.
	FetchTimeout caddy.Duration `json:"fetch_timeout,omitempty"`

	// MaxFrameWidth and MaxFrameHeight cap the coded frame size, checked before any frame buffer
	// (400 `frame_too_large`). Default: 4096×4096.
	MaxFrameWidth  int `json:"max_frame_width,omitempty"`
	MaxFrameHeight int `json:"max_frame_height,omitempty"`

	// MaxDecodedFrames caps the frames decoded per video (fallback `frame_limit`). Default: 36000.
	MaxDecodedFrames int `json:"max_decoded_frames,omitempty"`

	// MaxRGBBytes caps the RGB bytes of a video's sampled frames (fallback `frame_limit`).
	// Default: 512 MiB.
	MaxRGBBytes int64 `json:"max_rgb_bytes,omitempty"`

	// DecodeTimeout caps one video's decode (fallback `decode_timeout`). Default: 20s.
	DecodeTimeout caddy.Duration `json:"decode_timeout,omitempty"`

	// DecodeSlots is how many videos decode at once. Default: the CPU count.
	DecodeSlots int `json:"decode_slots,omitempty"`

	// SlotWait is how long a decode waits for a slot (fallback `decode_timeout`), and how long a
	// request waits in total for room in the in-flight budget (fallback `media_busy`). Default: 5s.
	SlotWait caddy.Duration `json:"slot_wait,omitempty"`

	// MaxInflightBytes is the process-wide budget of media bytes in flight, in bytes: the
	// buffers of running fetches and decoded data: URLs, held until their decode ends. A request
	// that cannot reserve its media within slot_wait falls back (`media_busy`). Default: 1 GiB.
	MaxInflightBytes int64 `json:"max_inflight_bytes,omitempty"`

	// ImageIdentity is how an image's identity is computed: "pixels" (the default, XXH3-64 over
	// the decoded pixels, equal across formats) or "bytes" (a hash of the encoded bytes, the size
	// from the header, no decode). config_image.go.
	ImageIdentity string `json:"image_identity,omitempty"`
}

// IndexConfig bounds the KV block index (LRU eviction of the oldest leaves beyond the caps).
type IndexConfig struct {
	// MaxBlocksPerWorker caps one worker's blocks. Default: 1048576.
	MaxBlocksPerWorker int `json:"max_blocks_per_worker,omitempty"`
	// MaxBlocks caps the blocks of all workers together. Default: 16777216.
	MaxBlocks int `json:"max_blocks,omitempty"`
}

func (c *IndexConfig) indexConfig() *index.Config {
	cfg := index.DefaultConfig()
	if c != nil {
		if c.MaxBlocksPerWorker > 0 {
			cfg.MaxBlocksPerWorker = c.MaxBlocksPerWorker
		}
		if c.MaxBlocks > 0 {
			cfg.MaxBlocks = c.MaxBlocks
		}
	}
	return cfg
}

func (m *MediaConfig) fetchConfig() *fetch.Config {
	cfg := fetch.DefaultConfig() // Budget: the config's shared one, set by newRoutingCore
	if m == nil {
		return cfg
	}
	cfg.AllowLoopback, cfg.AllowPrivate = m.AllowLoopback, m.AllowPrivate
	cfg.AllowAddrs, cfg.AllowCIDRs, cfg.AllowedDomains = m.AllowAddrs, m.AllowCIDRs, m.AllowedDomains
	cfg.FileRoot = m.FileRoot
	if m.MaxBytes > 0 {
		cfg.MaxBytes = m.MaxBytes
	}
	if m.FetchTimeout > 0 {
		cfg.Timeout = time.Duration(m.FetchTimeout)
	}
	return cfg
}

// budgetKey returns the size and slot wait of the media budget: the process-wide bytes in flight
// of media fetches and decodes, one per (size, slot_wait) in sharedPool (App.acquireShared), so a
// reload does not add a second budget beside the one that in-flight requests still hold.
func (m *MediaConfig) budgetKey() (size int64, wait time.Duration) {
	size, wait = fetch.DefaultBudgetBytes, media.DefaultDecoderConfig().SlotWait
	if m != nil && m.MaxInflightBytes > 0 {
		size = m.MaxInflightBytes
	}
	if m != nil && m.SlotWait > 0 {
		wait = time.Duration(m.SlotWait)
	}
	return size, wait
}

// budgetSize is the media budget's size in bytes.
func (m *MediaConfig) budgetSize() int64 {
	size, _ := m.budgetKey()
	return size
}

// CodecList returns the video codec allow-list (DefaultCodecs when none is configured); the
// media decoder consults it (mediaport.Codecs.Allows). Call it after provisioning, which
// rejects an invalid list.
func (m *MediaConfig) CodecList() mediaport.Codecs {
	if m == nil || m.Codecs == nil {
		return mediaport.DefaultCodecs
	}
	c, err := mediaport.ParseCodecs(m.Codecs)
	if err != nil {
		return mediaport.DefaultCodecs
	}
	return c
}

func (m *MediaConfig) decoderConfig() *media.DecoderConfig {
	cfg := media.DefaultDecoderConfig()
	if m == nil {
		return cfg
	}
	defaults.Override(&cfg.MaxWidth, m.MaxFrameWidth)
	defaults.Override(&cfg.MaxHeight, m.MaxFrameHeight)
	defaults.Override(&cfg.MaxDecodedFrames, m.MaxDecodedFrames)
	defaults.Override(&cfg.MaxRGBBytes, m.MaxRGBBytes)
	defaults.Override(&cfg.DecodeTimeout, time.Duration(m.DecodeTimeout))
	defaults.Override(&cfg.Slots, m.DecodeSlots)
	defaults.Override(&cfg.SlotWait, time.Duration(m.SlotWait))
	cfg.Codecs = m.CodecList() // the decoder refuses another codec before probing it
	return cfg
}

// provisionRouting expands placeholders and checks the routing config; the model is loaded in
// Start (it reads files of several MB).
func (rc *RoutingConfig) provisionRouting(repl *caddy.Replacer) error {
	rc.ModelDir = repl.ReplaceAll(rc.ModelDir, "")
	if rc.Media != nil {
		rc.Media.FileRoot = repl.ReplaceAll(rc.Media.FileRoot, "")
		if rc.Media.Codecs != nil {
			if _, err := mediaport.ParseCodecs(rc.Media.Codecs); err != nil {
				return fmt.Errorf("media: %w", err)
			}
		}
	}
	if rc.Scheduler != nil {
		if err := rc.Scheduler.Validate(); err != nil {
			return fmt.Errorf("scheduler: %w", err)
		}
	}
	if rc.MaxMedia < 0 {
		return errors.New("max_media must not be negative")
	}
	if rc.MaxMessages < 0 || rc.MaxParts < 0 {
		return errors.New("max_messages and max_parts must not be negative")
	}
	if m := rc.Media; m != nil {
		if _, err := m.imageIdentity(); err != nil {
			return fmt.Errorf("media: %w", err)
		}
		if m.MaxInflightBytes < 0 {
			return errors.New("media max_inflight_bytes must not be negative")
		}
		// A fetch of max_bytes holds its chunks (at most max_bytes+1) and then the assembled
		// copy for a moment: a smaller budget would answer media_busy to every media that large.
		maxBytes := m.fetchConfig().MaxBytes
		if b := m.budgetSize(); b <= 2*maxBytes {
			return fmt.Errorf("media max_inflight_bytes (%d) must be more than twice max_bytes (%d)", b, maxBytes)
		}
	}
	return nil
}

// validateRouting checks what can be checked without the network: the media allow-lists parse.
// (The model folder is checked by App.Validate through loadModel.)
func (rc *RoutingConfig) validateRouting() error {
	if err := rc.APIs.validate(); err != nil {
		return err
	}
	if m := rc.Media; m != nil {
		for _, c := range m.AllowCIDRs {
			if _, err := netip.ParsePrefix(c); err != nil {
				return fmt.Errorf("media allow_cidr %q: %w", c, err)
			}
		}
		for _, ap := range m.AllowAddrs {
			if _, err := netip.ParseAddrPort(ap); err != nil {
				return fmt.Errorf("media allow_addr %q (want ip:port): %w", ap, err)
			}
		}
	}
	return nil
}
