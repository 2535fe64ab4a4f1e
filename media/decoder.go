package media

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/asticode/go-astiav"

	"github.com/kvroute/kvroute/routing/reason"
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
	if out.MaxWidth <= 0 {
		out.MaxWidth = d.MaxWidth
	}
	if out.MaxHeight <= 0 {
		out.MaxHeight = d.MaxHeight
	}
	if out.MaxDecodedFrames <= 0 {
		out.MaxDecodedFrames = d.MaxDecodedFrames
	}
	if out.MaxRGBBytes <= 0 {
		out.MaxRGBBytes = d.MaxRGBBytes
	}
	if out.DecodeTimeout <= 0 {
		out.DecodeTimeout = d.DecodeTimeout
	}
	if out.Slots <= 0 {
		out.Slots = d.Slots
	}
	if out.SlotWait <= 0 {
		out.SlotWait = d.SlotWait
	}
	if out.Threads <= 0 {
		out.Threads = d.Threads
	}
	if out.CacheEntries == 0 {
		out.CacheEntries = d.CacheEntries
	}
	if out.CacheBytes <= 0 {
		out.CacheBytes = d.CacheBytes
	}
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
	Identity uint64
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

// Decoder decodes VP8/VP9 clips from memory under the configured limits and caches identities.
// Safe for concurrent use.
type Decoder struct {
	cfg   *DecoderConfig
	slots chan struct{} // one token per running decode
	cache *Cache        // nil when disabled

	mu       sync.Mutex           // guards inflight
	inflight map[CacheKey]*flight // Identify calls decoding now, joined by callers of the same key
}

// flight is one Identify decode that later callers of the same key wait for.
type flight struct {
	done chan struct{}
	res  *Result
	err  error
}

// NewDecoder returns a Decoder; cfg may be nil for the defaults.
func NewDecoder(cfg *DecoderConfig) (*Decoder, error) {
	c := cfg.withDefaults()
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

// Identify returns the identity of data under sampler, from the cache when the same bytes were
// decoded with the same samplerKey before (the key must name the sampler and all its parameters).
// Errors carry reason codes (reason.CodeOf).
// Concurrent calls with the same key share one decode (the later callers wait for it, within
// their own ctx); errors are not cached.
func (d *Decoder) Identify(ctx context.Context, data []byte, sampler Sampler, samplerKey string) (*Result, error) {
	if d.cache == nil {
		return d.Decode(ctx, data, sampler, DecodeOptions{})
	}
	key := NewCacheKey(data, samplerKey)
	for {
		if r, ok := d.cache.Get(key); ok {
			return r, nil
		}
		d.mu.Lock()
		f, ok := d.inflight[key]
		if !ok {
			break // d.mu held: lead the decode below
		}
		d.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctxError(ctx.Err())
		}
		if errors.Is(f.err, context.Canceled) {
			continue // the leader's client went away; this caller decodes itself
		}
		if f.err != nil {
			return nil, f.err
		}
		r := *f.res
		r.Indices = append([]int(nil), r.Indices...)
		r.Metadata = append([]byte(nil), r.Metadata...)
		r.Cached = true
		return &r, nil
	}
	f := &flight{done: make(chan struct{})}
	d.inflight[key] = f
	d.mu.Unlock()

	f.res, f.err = d.Decode(ctx, data, sampler, DecodeOptions{})
	if f.err == nil {
		d.cache.Put(key, f.res)
	}
	d.mu.Lock()
	delete(d.inflight, key)
	d.mu.Unlock()
	close(f.done)
	if f.err != nil {
		return nil, f.err
	}
	r := *f.res
	r.Indices = append([]int(nil), r.Indices...)
	r.Metadata = append([]byte(nil), r.Metadata...)
	return &r, nil
}

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
