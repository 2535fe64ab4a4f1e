package media

import (
	"runtime"
	"time"

	"github.com/kvroute/kvroute/internal/defaults"
	"github.com/kvroute/kvroute/reason"
)

// DecoderConfig bounds every decode (DESIGN.md §6). Zero fields take the defaults of
// DefaultDecoderConfig.
type DecoderConfig struct {
	// MaxWidth and MaxHeight cap the coded frame size, checked on the container, on every frame
	// header of the bitstream before the packet is decoded, and on every decoded frame.
	// Exceeding them is reason.FrameTooLarge. Default: 4096×4096.
	MaxWidth, MaxHeight int
	// MaxDecodedFrames caps the presentable frames decoded per pass (reason.FrameLimit).
	// Default: 36000.
	MaxDecodedFrames int
	// MaxRGBBytes caps T×H×W×3 of the sampled frames (reason.FrameLimit). Default: 512 MiB.
	MaxRGBBytes int64
	// DecodeTimeout caps the wall time of one video's decode, all passes (reason.DecodeTimeout).
	// Default: 20s.
	DecodeTimeout time.Duration
	// Slots is the number of decodes that may run at once. Default: runtime.NumCPU().
	Slots int
	// SlotWait is how long a decode waits for a slot (reason.DecodeTimeout). Default: 5s.
	SlotWait time.Duration
	// Threads is the decoder thread count per decode (the output does not depend on it).
	// Default: 1.
	Threads int
	// CacheEntries and CacheBytes bound the decode cache (LRU). CacheEntries < 0 disables it.
	// Defaults: 4096 entries, 16 MiB.
	CacheEntries int
	CacheBytes   int64
	// Codecs is the video codec allow-list (`media { codecs … }`, `kvroute identity --codecs`):
	// any of av1, h264, hevc, vp8, vp9. A clip of a codec not listed is reason.UnsupportedCodec
	// before any decoder runs; the decoder of a listed codec is chosen by codec id (media/codecs.go).
	// Default (nil): DefaultCodecs, vp8 and vp9.
	Codecs []string
}

// DefaultDecoderConfig returns the DESIGN.md §6 defaults.
func DefaultDecoderConfig() *DecoderConfig {
	return &DecoderConfig{
		MaxWidth:         4096,
		MaxHeight:        4096,
		MaxDecodedFrames: 36000,
		MaxRGBBytes:      512 << 20,
		DecodeTimeout:    20 * time.Second,
		Slots:            runtime.NumCPU(),
		SlotWait:         5 * time.Second,
		Threads:          1,
		CacheEntries:     4096,
		CacheBytes:       16 << 20,
	}
}

func (c *DecoderConfig) withDefaults() *DecoderConfig {
	d := DefaultDecoderConfig()
	if c == nil {
		return d
	}
	out := *c
	defaults.Positive(&out.MaxWidth, d.MaxWidth)
	defaults.Positive(&out.MaxHeight, d.MaxHeight)
	defaults.Positive(&out.MaxDecodedFrames, d.MaxDecodedFrames)
	defaults.Positive(&out.MaxRGBBytes, d.MaxRGBBytes)
	defaults.Positive(&out.DecodeTimeout, d.DecodeTimeout)
	defaults.Positive(&out.Slots, d.Slots)
	defaults.Positive(&out.SlotWait, d.SlotWait)
	defaults.Positive(&out.Threads, d.Threads)
	if out.CacheEntries == 0 {
		out.CacheEntries = d.CacheEntries
	}
	defaults.Positive(&out.CacheBytes, d.CacheBytes)
	if out.Codecs == nil {
		out.Codecs = DefaultCodecs
	}
	out.Codecs = append([]string(nil), out.Codecs...)
	return &out
}

// checkSize rejects a frame size over the cap (reason.FrameTooLarge) or a non-positive one.
func (c *DecoderConfig) checkSize(w, h int, where string) error {
	if w > c.MaxWidth || h > c.MaxHeight {
		return reason.New(reason.FrameTooLarge, "decoding video: %s frame size %dx%d exceeds %dx%d", where, w, h, c.MaxWidth, c.MaxHeight)
	}
	if w <= 0 || h <= 0 {
		return reason.New(reason.MediaUndecodable, "decoding video: %s frame size %dx%d", where, w, h)
	}
	return nil
}
