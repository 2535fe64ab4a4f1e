package media

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"unsafe"

	"github.com/asticode/go-astiav"

	"github.com/kvroute/kvroute/reason"
)

// Rational is a frame rate or time base as FFmpeg reports it.
type Rational struct{ Num, Den int }

// Float returns Num/Den as float64, 0 when Den is 0.
func (r Rational) Float() float64 {
	if r.Den == 0 {
		return 0
	}
	return float64(r.Num) / float64(r.Den)
}

func (r Rational) String() string { return fmt.Sprintf("%d/%d", r.Num, r.Den) }

// Stats are the probe facts of a clip's video stream (DESIGN.md §3 definitions).
type Stats struct {
	// Codec is FFmpeg's codec name: "vp8", "vp9", "h264", "hevc" or "av1".
	Codec string
	// Width and Height are the coded frame size in pixels: the container's, replaced by the first
	// decoded frame's once decoding ran.
	Width, Height int
	// PixelFormat is the decoded pixel format (e.g. "yuv420p"), empty before decoding.
	PixelFormat string
	// AvgFrameRate and RealFrameRate are the stream's avg_frame_rate and r_frame_rate.
	AvgFrameRate, RealFrameRate Rational
	// FPS is source_fps: AvgFrameRate, or RealFrameRate when the average is 0/0.
	FPS float64
	// Duration is source_duration in seconds: duration_ts*tb_num/tb_den when the stream has a
	// duration, else the container duration, else 0.
	Duration float64
	// HeaderFrames is the container's frame count (nb_frames), 0 when unknown.
	HeaderFrames int64
	// DecodedFrames is the number of presentable frames the decoder returned; 0 until counted.
	DecodedFrames int
	// StreamIndex is the container index of the video stream.
	StreamIndex int
}

// ContainerFrames is the frame count a loader that trusts the container sees (frame_count_source
// "container", DESIGN.md §2.3): nb_frames, else round(duration × fps) (ties to even), else 0.
func (s Stats) ContainerFrames() int {
	if s.HeaderFrames > 0 {
		return int(s.HeaderFrames)
	}
	n := math.RoundToEven(s.Duration * s.FPS)
	if n > 0 && n < math.MaxInt32 {
		return int(n)
	}
	return 0
}

// input is one opened clip: demuxer over memory, the video stream and its decoder.
type input struct {
	cfg    *DecoderConfig
	mio    *memIO
	fc     *astiav.FormatContext
	opened bool
	closed bool
	intr   *interrupter
	cc     *astiav.CodecContext
	stream *astiav.Stream
	guard  *sizeGuard // refuses an oversized picture before it is allocated (h264, hevc)
	codec  string     // the FFmpeg decoder opened (codecs.go)
	stats  Stats
	logs   *logTags // FFmpeg log lines of fc and cc carry the request id (avlog.go)
}

// openInput demuxes data from memory, selects the video stream and checks it (DESIGN.md §3, §6):
// no parseable container or video stream → MediaUndecodable; another codec → UnsupportedCodec;
// several real video streams → MultiStream; a display matrix → Rotation; a container size over the
// cap → FrameTooLarge. The decoder is opened with max_pixels, so no frame over the cap is allocated.
func openInput(ctx context.Context, cfg *DecoderConfig, data []byte) (_ *input, err error) {
	in := &input{cfg: cfg}
	liveInputs.Add(1)
	defer func() {
		if err != nil {
			in.close()
		}
	}()
	if len(data) == 0 {
		return nil, reason.New(reason.MediaUndecodable, "decoding video: empty input")
	}
	// A list of other media is refused before FFmpeg sees it, whatever FFmpeg is linked: the
	// client learns what it sent, and no demuxer gets to resolve the references (issue 24).
	if kind := manifestKind(data); kind != "" {
		return nil, reason.New(reason.MediaUndecodable, "the video is %s, which lists other media: kvroute decodes self-contained Matroska/WebM, MP4/MOV and IVF files and never follows references", kind)
	}
	if kind := otherContainer(data); kind != "" {
		return nil, reason.New(reason.UnsupportedCodec, "the video is %s, a container kvroute does not open (only Matroska/WebM, MP4/MOV and IVF): forwarded unchanged, routed on its text prefix and byte affinity", kind)
	}
	if externalDataRef(data) {
		return nil, reason.New(reason.MediaUndecodable, "the video is an MP4/MOV file whose samples live elsewhere (an external data reference): kvroute decodes self-contained files only")
	}
	in.fc = astiav.AllocFormatContext()
	if in.fc == nil {
		return nil, errors.New("allocating format context failed")
	}
	in.logs = newLogTags(ctx)
	in.logs.tag(unsafe.Pointer(formatContextPtr(in.fc)))
	in.intr = installInterrupt(ctx, in.fc)
	// Not astiav.AllocIOContext: v0.16.0 keeps its read callback, and through it data, in a global
	// map that IOContext.Free never clears, so every decoded clip stayed live (issue 12).
	if in.mio, err = attachMemIO(in.fc, data, in.intr); err != nil {
		return nil, err
	}
	allowed, err := allowedCodecs(cfg.Codecs)
	if err != nil {
		return nil, err
	}
	if err := lockDown(in.fc, decoderNames(allowed)); err != nil {
		return nil, fmt.Errorf("confining the format context: %w", err)
	}
	// The mov demuxer's own switches for external data references, off whatever their default.
	openOpts := astiav.NewDictionary()
	defer openOpts.Free()
	_ = openOpts.Set("enable_drefs", "0", 0)
	_ = openOpts.Set("use_absolute_path", "0", 0)
	if err := in.fc.OpenInput("", nil, openOpts); err != nil {
		// avformat_open_input frees the context on failure. go-astiav keeps a stale entry for its
		// address in its classer map; the next context at that address replaces it.
		in.fc = nil
		if ctx.Err() != nil {
			return nil, ctxError(ctx.Err())
		}
		// The message reaches the client (400): it says what was found, FFmpeg's own words included.
		if errors.Is(err, errEINVAL) { // a format FFmpeg knows, refused by the demuxer allow-list
			return nil, reason.Wrap(reason.MediaUndecodable, err, "the video is not a media container kvroute opens (only Matroska/WebM, MP4/MOV and IVF; the bytes sniff as %s)",
				http.DetectContentType(data))
		}
		return nil, reason.Wrap(reason.MediaUndecodable, err, "the video is not a media container FFmpeg can read (%v; the bytes sniff as %s)",
			err, http.DetectContentType(data))
	}
	in.opened = true
	// Another codec is rejected before probing: avformat_find_stream_info would decode it.
	if real, ok, first := countVideoCodecs(in.fc, codecIDs(allowed)); real > 0 && ok == 0 {
		return nil, reason.New(reason.UnsupportedCodec, "decoding video: codec %s is not in the codec allow-list (%s)", first, codecNames(allowed))
	}
	// So is a size over the cap the headers declare: probing decodes frames (H.264's decode delay).
	if w, h := declaredVideoSize(in.fc); w > cfg.MaxWidth || h > cfg.MaxHeight {
		return nil, reason.New(reason.FrameTooLarge, "decoding video: container frame size %dx%d exceeds %dx%d", w, h, cfg.MaxWidth, cfg.MaxHeight)
	}
	maxPixels := int64(cfg.MaxWidth) * int64(cfg.MaxHeight)
	if err := findStreamInfo(in.fc, maxPixels, 1); err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx.Err())
		}
		return nil, reason.Wrap(reason.MediaUndecodable, err, "reading the video's stream info (%v)", err)
	}
	idx, real := selectVideoStream(in.fc)
	if real == 0 || idx < 0 {
		return nil, reason.New(reason.MediaUndecodable, "decoding video: no video stream")
	}
	if real > 1 {
		return nil, reason.New(reason.MultiStream, "decoding video: %d video streams", real)
	}
	in.stream = in.fc.Streams()[idx]
	cp := in.stream.CodecParameters()
	s := &in.stats
	s.StreamIndex = idx
	vc, known := codecByID(cp.CodecID())
	if !known || !slices.ContainsFunc(allowed, func(c videoCodec) bool { return c.id == vc.id }) {
		return nil, reason.New(reason.UnsupportedCodec, "decoding video: codec %s is not in the codec allow-list (%s)", cp.CodecID(), codecNames(allowed))
	}
	s.Codec = vc.name
	s.Width, s.Height = cp.Width(), cp.Height()
	if s.Width != 0 || s.Height != 0 { // 0x0: unknown here; the bitstream and frame checks still run
		if err := cfg.checkSize(s.Width, s.Height, "container"); err != nil {
			return nil, err
		}
	}
	if dm := streamDisplayMatrix(in.fc, idx); len(dm) > 0 && !identityMatrix(dm) {
		return nil, reason.New(reason.Rotation, "decoding video: display matrix present")
	}
	avg, rfr := in.stream.AvgFrameRate(), in.stream.RFrameRate()
	s.AvgFrameRate = Rational{avg.Num(), avg.Den()}
	s.RealFrameRate = Rational{rfr.Num(), rfr.Den()}
	if s.AvgFrameRate.Num != 0 && s.AvgFrameRate.Den != 0 {
		s.FPS = s.AvgFrameRate.Float()
	} else {
		s.FPS = s.RealFrameRate.Float()
	}
	tb := in.stream.TimeBase()
	if d := in.stream.Duration(); d > 0 && tb.Den() != 0 {
		s.Duration = float64(d) * float64(tb.Num()) / float64(tb.Den())
	} else if d := in.fc.Duration(); d > 0 {
		s.Duration = float64(d) / 1e6
	}
	s.HeaderFrames = in.stream.NbFrames()

	if err := checkExtradataSizes(cfg, s.Codec, cp.ExtraData()); err != nil {
		return nil, err
	}
	// The one decoder the codec id maps to (media/codecs.go), never FFmpeg's first registered one.
	codec := astiav.FindDecoderByName(vc.decoder)
	if codec == nil {
		return nil, reason.New(reason.UnsupportedCodec, "decoding video: no %s decoder (%s) in this FFmpeg", s.Codec, vc.decoder)
	}
	in.codec = codec.Name()
	in.cc = astiav.AllocCodecContext(codec)
	if in.cc == nil {
		return nil, errors.New("allocating codec context failed")
	}
	// go-astiav (v0.16.0, v0.39.0 and v0.42.0) keeps the AVCodecContext as CodecContext's first field; the
	// pointer is only a log-owner key, never dereferenced.
	in.logs.tag(*(*unsafe.Pointer)(unsafe.Pointer(in.cc)))
	if err := cp.ToCodecContext(in.cc); err != nil {
		return nil, reason.Wrap(reason.MediaUndecodable, err, "copying codec parameters")
	}
	if in.guard, err = installSizeGuard(in.cc, cfg.MaxWidth, cfg.MaxHeight); err != nil {
		return nil, err
	}
	opts := astiav.NewDictionary()
	defer opts.Free()
	_ = opts.Set("max_pixels", fmt.Sprint(maxPixels), 0)
	_ = opts.Set("threads", fmt.Sprint(cfg.Threads), 0)
	_ = opts.Set("codec_whitelist", decoderNames(allowed), 0)
	if err := in.cc.Open(codec, opts); err != nil {
		return nil, reason.Wrap(reason.MediaUndecodable, err, "opening %s decoder", s.Codec)
	}
	return in, nil
}

// identityMatrix reports whether a display matrix side data block is the identity (no rotation).
func identityMatrix(dm []byte) bool {
	if len(dm) < 36 {
		return false
	}
	want := [9]int32{1 << 16, 0, 0, 0, 1 << 16, 0, 0, 0, 1 << 30}
	for i, w := range want {
		v := int32(uint32(dm[4*i]) | uint32(dm[4*i+1])<<8 | uint32(dm[4*i+2])<<16 | uint32(dm[4*i+3])<<24)
		if v != w {
			return false
		}
	}
	return true
}

func (in *input) close() {
	if in == nil || in.closed {
		return
	}
	in.closed = true
	liveInputs.Add(-1)
	defer in.logs.untag() // after the contexts are freed: their last lines still carry the id
	if in.cc != nil {
		in.cc.Free()
		in.cc = nil
	}
	in.guard.free() // after the codec context: its get_format reads the guard
	in.guard = nil
	if in.fc != nil {
		if in.opened {
			in.fc.CloseInput()
		}
		in.fc.Free()
		in.fc = nil
	}
	in.mio.free() // after the format context: avformat_close_input leaves a custom pb to us
	in.mio = nil
	in.intr.free()
	in.intr = nil
}

// frameVisitor is called for every presentable frame, in output order, with its index.
type frameVisitor func(idx int, f *astiav.Frame) error

// decode reads every packet of the video stream, checks each declared frame size before the packet
// reaches the decoder, drains the decoder after every packet (VP9 superframes hold hidden frames)
// and flushes it at EOF. A read error ends the stream as it does for the ffmpeg CLI (truncated
// files keep the frames decoded so far); undecodable packets are skipped. It returns the number of
// presentable frames. ctx is checked between packets.
func (in *input) decode(ctx context.Context, visit frameVisitor) (int, error) {
	pkt := astiav.AllocPacket()
	defer pkt.Free()
	frame := astiav.AllocFrame()
	defer frame.Free()
	count := 0
	first := true
	receive := func() error {
		for {
			err := in.cc.ReceiveFrame(frame)
			if errors.Is(err, astiav.ErrEagain) || errors.Is(err, astiav.ErrEof) {
				return nil
			}
			if err != nil {
				return nil // a broken frame is skipped, as the ffmpeg CLI does
			}
			err = in.onFrame(frame, count, &first, visit)
			frame.Unref()
			if err != nil {
				return err
			}
			count++
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return count, ctxError(err)
		}
		if err := in.fc.ReadFrame(pkt); err != nil {
			break // EOF, or a read error: the stream ends here
		}
		if pkt.StreamIndex() != in.stats.StreamIndex {
			pkt.Unref()
			continue
		}
		for _, fs := range packetFrameSizes(in.stats.Codec, pkt.Data()) {
			if err := in.cfg.checkSize(fs.w, fs.h, "bitstream"); err != nil {
				pkt.Unref()
				return count, err
			}
		}
		err := in.cc.SendPacket(pkt)
		pkt.Unref()
		if errors.Is(err, astiav.ErrEagain) {
			return count, reason.New(reason.MediaUndecodable, "decoding video: decoder refused input while drained")
		}
		if err := receive(); err != nil {
			return count, err
		}
		if err := in.guardError(); err != nil {
			return count, err
		}
	}
	if err := in.cc.SendPacket(nil); err == nil {
		if err := receive(); err != nil {
			return count, err
		}
	}
	if err := in.guardError(); err != nil {
		return count, err
	}
	return count, nil
}

// guardError is FrameTooLarge once the size guard refused a picture size (the decoder then skips
// the picture; the clip must not decode as if it had fewer frames).
func (in *input) guardError() error {
	if w, h, ok := in.guard.refused(); ok {
		return reason.New(reason.FrameTooLarge, "decoding video: bitstream frame size %dx%d exceeds %dx%d", w, h, in.cfg.MaxWidth, in.cfg.MaxHeight)
	}
	return nil
}

// onFrame checks one decoded frame (size, format, rotation, frame cap) and hands it to visit.
func (in *input) onFrame(f *astiav.Frame, idx int, first *bool, visit frameVisitor) error {
	w, h := f.Width(), f.Height()
	if err := in.cfg.checkSize(w, h, "decoded frame"); err != nil {
		return err
	}
	if *first {
		*first = false
		in.stats.Width, in.stats.Height = w, h
		in.stats.PixelFormat = f.PixelFormat().String()
	} else if w != in.stats.Width || h != in.stats.Height {
		return reason.New(reason.ResolutionChange, "decoding video: frame %d is %dx%d, first was %dx%d", idx, w, h, in.stats.Width, in.stats.Height)
	} else if pf := f.PixelFormat().String(); pf != in.stats.PixelFormat {
		return reason.New(reason.ResolutionChange, "decoding video: frame %d is %s, first was %s", idx, pf, in.stats.PixelFormat)
	}
	if dm := frameDisplayMatrix(f); dm != nil && !identityMatrix(dm) {
		return reason.New(reason.Rotation, "decoding video: frame %d carries a display matrix", idx)
	}
	if idx >= in.cfg.MaxDecodedFrames {
		return reason.New(reason.FrameLimit, "decoding video: more than %d frames", in.cfg.MaxDecodedFrames)
	}
	return visit(idx, f)
}

// ctxError maps a context error to the decode_timeout fallback (deadline) or passes a cancellation.
func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return reason.Wrap(reason.DecodeTimeout, err, "decoding video")
	}
	return fmt.Errorf("decoding video: %w", err)
}
