package media

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kvroute/kvroute/kv"

	"github.com/asticode/go-astiav"

	"github.com/kvroute/kvroute/reason"
)

// Sampler picks the frames to hash from a clip of totalFrames presentable frames: indices into
// [0, totalFrames), in the order they are hashed. The layout package provides the samplers of the
// video contract (DESIGN.md §4). It may be called twice: first with the container's count when the
// container gives one, then with the decoded count when they differ.
type Sampler func(totalFrames int, stats Stats) ([]int, error)

// IndexSampler returns a Sampler that always picks indices (for the CLI's --indices).
func IndexSampler(indices []int) Sampler {
	return func(int, Stats) ([]int, error) { return append([]int(nil), indices...), nil }
}

// Result is a decoded clip's identity and what it was computed from.
type Result struct {
	// Stats are the probe facts, with DecodedFrames set.
	Stats Stats
	// Indices are the sampled frame indices, in hashing order.
	Indices []int
	// Metadata is J of DESIGN.md §3.
	Metadata []byte
	// RGBBytes is len(P): T×H×W×3.
	RGBBytes int64
	// Identity is the XXH3-64 identity; never 0.
	Identity kv.Identity
	// Frames are the sampled rgb24 frames (H×W×3 bytes each), only with DecodeOptions.KeepFrames.
	Frames [][]byte
	// Passes is the number of decode passes run (1, or 2 when the container's count was wrong).
	Passes int
	// Cached reports that the result came from the decode cache (no Frames then).
	Cached bool
}

// IdentityHex is the identity's wire form (16 lowercase hex characters).
func (r *Result) IdentityHex() string { return FormatIdentity(r.Identity) }

// DecodeOptions are per-call options of Decoder.Decode.
type DecodeOptions struct {
	// KeepFrames returns the sampled rgb24 frames in Result.Frames.
	KeepFrames bool
}

// Decoder decodes the clips of its codec allow-list (VP8, VP9; H.264, HEVC, AV1 on request) from memory under the configured limits and caches identities.
// Safe for concurrent use.
type Decoder struct {
	cfg   *DecoderConfig
	slots chan struct{} // one token per running decode
	cache *Cache        // nil when disabled

	mu       sync.Mutex           // guards inflight
	inflight map[CacheKey]*flight // Identify calls decoding now, joined by callers of the same key
}

// NewDecoder returns a Decoder; cfg may be nil for the defaults.
func NewDecoder(cfg *DecoderConfig) (*Decoder, error) {
	c := cfg.withDefaults()
	if _, err := allowedCodecs(c.Codecs); err != nil {
		return nil, fmt.Errorf("creating video decoder: %w", err)
	}
	d := &Decoder{cfg: c, slots: make(chan struct{}, c.Slots), inflight: map[CacheKey]*flight{}}
	if c.CacheEntries > 0 {
		d.cache = NewCache(c.CacheEntries, c.CacheBytes)
	}
	return d, nil
}

// Config returns the effective configuration.
func (d *Decoder) Config() DecoderConfig { return *d.cfg }

// Cache returns the decode cache, nil when disabled.
func (d *Decoder) Cache() *Cache { return d.cache }

// Probe opens data and returns the video stream's probe facts (DecodedFrames 0: nothing is decoded
// beyond FFmpeg's stream-info probe), with the same checks and reason codes as Decode's first step.
func (d *Decoder) Probe(ctx context.Context, data []byte) (Stats, error) {
	if err := d.acquire(ctx); err != nil {
		return Stats{}, err
	}
	defer d.release()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DecodeTimeout)
	defer cancel()
	in, err := openInput(ctx, d.cfg, data)
	if err != nil {
		return Stats{}, err
	}
	defer in.close()
	return in.stats, nil
}

// acquire takes a decode slot, waiting at most SlotWait (reason.DecodeTimeout).
func (d *Decoder) acquire(ctx context.Context) error {
	select {
	case d.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(d.cfg.SlotWait)
	defer t.Stop()
	select {
	case d.slots <- struct{}{}:
		return nil
	case <-t.C:
		return reason.New(reason.DecodeTimeout, "waiting for a decode slot: %d busy for %s", cap(d.slots), d.cfg.SlotWait)
	case <-ctx.Done():
		return ctxError(ctx.Err())
	}
}

func (d *Decoder) release() { <-d.slots }

// SlotsBusy returns how many decode slots are taken now (decodes and probes running) and how many
// there are (DecoderConfig.Slots), for the operator's gauges. Safe for concurrent use.
func (d *Decoder) SlotsBusy() (busy, total int) { return len(d.slots), cap(d.slots) }

// Decode decodes data (a WebM, MKV or MP4 file in memory), selects frames with sampler, converts
// them to rgb24 and computes the identity (DESIGN.md §3). The total frame count is the decoded
// count: when the container announces a count (nb_frames, else duration × fps) the sampler runs on
// it first and the selected frames are converted during the counting pass; a second pass runs only
// when the decoded count differs and the new selection needs frames not converted yet. All frames
// are never held. Errors carry reason codes: MediaUndecodable, UnsupportedCodec, FrameTooLarge,
// MultiStream, ResolutionChange, Rotation, FrameLimit, DecodeTimeout, IdentityError.
func (d *Decoder) Decode(ctx context.Context, data []byte, sampler Sampler, opts DecodeOptions) (res *Result, err error) {
	if sampler == nil {
		return nil, errors.New("decoding video: nil sampler")
	}
	if err := d.acquire(ctx); err != nil {
		return nil, err
	}
	defer d.release()
	ctx, cancel := context.WithTimeout(ctx, d.cfg.DecodeTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, reason.New(reason.IdentityError, "decoding video: panic: %v", p)
		}
	}()

	// Pass 1: count the frames; convert the frames the container's count selects.
	in, err := openInput(ctx, d.cfg, data)
	if err != nil {
		return nil, err
	}
	stats := in.stats
	var guess []int
	if n := stats.ContainerFrames(); n > 0 && n <= d.cfg.MaxDecodedFrames {
		if idx, serr := sampler(n, stats); serr == nil && validIndices(idx, n) == nil &&
			d.rgbBytes(len(idx), stats.Width, stats.Height) <= d.cfg.MaxRGBBytes {
			guess = idx
		}
	}
	got := map[int][]byte{}
	total, err := d.pass(ctx, in, guess, got)
	stats = in.stats
	in.close()
	if err != nil {
		return nil, err
	}
	if total == 0 {
		return nil, reason.New(reason.MediaUndecodable, "decoding video: no frame decoded")
	}
	stats.DecodedFrames = total
	idx, err := sampler(total, stats)
	if err != nil {
		if reason.CodeOf(err) != "" {
			return nil, fmt.Errorf("sampling frames: %w", err) // e.g. frame_count_mismatch
		}
		return nil, reason.Wrap(reason.LayoutError, err, "sampling frames")
	}
	if err := validIndices(idx, total); err != nil {
		return nil, reason.Wrap(reason.LayoutError, err, "sampling frames")
	}
	if n := d.rgbBytes(len(idx), stats.Width, stats.Height); n > d.cfg.MaxRGBBytes {
		return nil, reason.New(reason.FrameLimit, "decoding video: %d sampled rgb bytes exceed %d", n, d.cfg.MaxRGBBytes)
	}
	passes := 1
	if missing(idx, got) {
		// Pass 2: the container's count was wrong (VFR, truncation, no duration).
		passes = 2
		in, err := openInput(ctx, d.cfg, data)
		if err != nil {
			return nil, err
		}
		got = map[int][]byte{}
		n, err := d.pass(ctx, in, idx, got)
		in.close()
		if err != nil {
			return nil, err
		}
		if n != total || missing(idx, got) {
			return nil, reason.New(reason.MediaUndecodable, "decoding video: second pass decoded %d frames, first %d", n, total)
		}
	}
	frames := make([][]byte, len(idx))
	for i, k := range idx {
		frames[i] = got[k]
	}
	meta := Metadata{SourceFPS: stats.FPS, SourceDuration: stats.Duration, SourceTotalFrames: total, FramesIndices: idx}
	if !(stats.FPS > 0) {
		return nil, reason.New(reason.IdentityError, "decoding video: source fps %v", stats.FPS)
	}
	j, err := meta.JSON()
	if err != nil {
		return nil, err
	}
	id, err := Identity(j, len(idx), stats.Height, stats.Width, frames)
	if err != nil {
		return nil, err
	}
	res = &Result{
		Stats:    stats,
		Indices:  append([]int(nil), idx...),
		Metadata: j,
		RGBBytes: d.rgbBytes(len(idx), stats.Width, stats.Height),
		Identity: id,
		Passes:   passes,
	}
	if opts.KeepFrames {
		res.Frames = frames
	}
	return res, nil
}

func (d *Decoder) rgbBytes(t, w, h int) int64 { return int64(t) * int64(w) * int64(h) * 3 }

// pass decodes in completely, converting the frames listed in want into got.
func (d *Decoder) pass(ctx context.Context, in *input, want []int, got map[int][]byte) (int, error) {
	wanted := make(map[int]bool, len(want))
	for _, k := range want {
		wanted[k] = true
	}
	var sc *scaler
	defer func() { sc.free() }()
	return in.decode(ctx, func(i int, f *astiav.Frame) error {
		if !wanted[i] || got[i] != nil {
			return nil
		}
		if int64(len(got)+1)*int64(f.Width())*int64(f.Height())*3 > d.cfg.MaxRGBBytes {
			return reason.New(reason.FrameLimit, "decoding video: sampled rgb bytes exceed %d", d.cfg.MaxRGBBytes)
		}
		if sc == nil {
			var err error
			if sc, err = newScaler(f.Width(), f.Height(), f.PixelFormat()); err != nil {
				return reason.Wrap(reason.IdentityError, err, "converting frame %d", i)
			}
		}
		buf := make([]byte, f.Width()*f.Height()*3)
		if err := sc.convert(f, buf); err != nil {
			return reason.Wrap(reason.IdentityError, err, "converting frame %d", i)
		}
		got[i] = buf
		return nil
	})
}

// validIndices checks that idx is a non-empty list of frame indices in [0, total).
func validIndices(idx []int, total int) error {
	if len(idx) == 0 {
		return errors.New("no frame selected")
	}
	for _, k := range idx {
		if k < 0 || k >= total {
			return fmt.Errorf("frame index %d outside [0, %d)", k, total)
		}
	}
	return nil
}

func missing(idx []int, got map[int][]byte) bool {
	for _, k := range idx {
		if got[k] == nil {
			return true
		}
	}
	return false
}
