package media

// #cgo pkg-config: libavformat libavcodec libavutil libswscale
// #include <errno.h>
// #include <stdlib.h>
// #include <libswscale/swscale.h>
// #include "shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/asticode/go-astiav"
)

// The swscale flag bits of DESIGN.md §3 (libswscale/swscale.h): bilinear+accurate_rnd+bitexact+
// full_chroma_int. Plain bilinear, Dynamo's choice, is CPU dependent; these four are not.
const (
	swsBilinear      = C.SWS_BILINEAR
	swsAccurateRnd   = C.SWS_ACCURATE_RND
	swsBitexact      = C.SWS_BITEXACT
	swsFullChrHInt   = C.SWS_FULL_CHR_H_INT
	identitySwsFlags = swsBilinear | swsAccurateRnd | swsBitexact | swsFullChrHInt
)

// codecIDAV1 is AV_CODEC_ID_AV1 (go-astiav v0.16.0 has no constant for it).
const codecIDAV1 = astiav.CodecID(C.AV_CODEC_ID_AV1)

// formatContextPtr returns the AVFormatContext behind fc. go-astiav (v0.16.0, v0.39.0, v0.42.0) keeps it as the
// first (unexported) field of FormatContext and offers no accessor; the layout is pinned by go.mod
// and checked by TestFormatContextPointer.
func formatContextPtr(fc *astiav.FormatContext) *C.AVFormatContext {
	return *(**C.AVFormatContext)(unsafe.Pointer(fc))
}

// ForceCPUFlags calls av_force_cpu_flags: process-wide, it changes the SIMD code paths of every
// decoder and scaler created afterwards (0 = no SIMD, -1 = detect again). For tests and debugging
// only; the identity does not depend on it.
func ForceCPUFlags(flags int) { C.kv_force_cpu_flags(C.int(flags)) }

// CPUFlags returns av_get_cpu_flags().
func CPUFlags() int { return int(C.kv_get_cpu_flags()) }

// avError wraps an FFmpeg return code as a go-astiav error (errors.Is-able against astiav.ErrEof
// and friends).
func avError(ret C.int) error {
	if ret >= 0 {
		return nil
	}
	return astiav.Error(int(ret))
}

// findStreamInfo runs avformat_find_stream_info with max_pixels on every probing decoder.
func findStreamInfo(fc *astiav.FormatContext, maxPixels int64, threads int) error {
	return avError(C.kv_find_stream_info(formatContextPtr(fc), C.int64_t(maxPixels), C.int(threads)))
}

// lockDown confines fc before it is opened (kv_lock_down: demuxer, protocol and decoder
// allow-lists, an io_open that refuses nested opens; DESIGN.md §6 "The media library").
// decoders is the codec_whitelist (decoderNames of the allow-list).
func lockDown(fc *astiav.FormatContext, decoders string) error {
	cs := C.CString(decoders)
	defer C.free(unsafe.Pointer(cs))
	return avError(C.kv_lock_down(formatContextPtr(fc), cs))
}

// nestedOpensRefused is the process's count of nested opens the io_open of lockDown refused.
func nestedOpensRefused() int64 { return int64(C.kv_nested_opens_refused()) }

// countVideoCodecs counts the real video streams the container header declares and those whose
// codec is one of ids, and returns the first one's codec.
func countVideoCodecs(fc *astiav.FormatContext, ids []astiav.CodecID) (real, allowed int, first astiav.CodecID) {
	cids := make([]C.int, len(ids)+1) // never empty: &cids[0] is valid
	for i, id := range ids {
		cids[i] = C.int(id)
	}
	var a, f C.int
	real = int(C.kv_real_video_codecs(formatContextPtr(fc), &cids[0], C.int(len(ids)), &a, &f))
	return real, int(a), astiav.CodecID(f)
}

// declaredVideoSize is the largest width and height the real video streams' headers declare,
// before any decoder ran (0 when unknown).
func declaredVideoSize(fc *astiav.FormatContext) (w, h int) {
	var cw, ch C.int
	C.kv_declared_video_size(formatContextPtr(fc), &cw, &ch)
	return int(cw), int(ch)
}

// sizeGuard refuses, in the decoder's get_format callback, a picture size over the cap before the
// picture is allocated (kv_size_guard: h264 and hevc call get_format for every new sequence
// parameter set).
type sizeGuard struct{ c *C.kv_size_guard }

// installSizeGuard sets cc's get_format and opaque; call before the codec context is opened and
// free the guard after the context.
func installSizeGuard(cc *astiav.CodecContext, maxW, maxH int) (*sizeGuard, error) {
	avctx := *(**C.AVCodecContext)(unsafe.Pointer(cc)) // go-astiav keeps it as CodecContext's first field
	g := C.kv_size_guard_install(avctx, C.int(maxW), C.int(maxH))
	if g == nil {
		return nil, errors.New("allocating the size guard failed")
	}
	return &sizeGuard{c: g}, nil
}

// refused returns the first picture size the guard refused, ok false when none.
func (g *sizeGuard) refused() (w, h int, ok bool) {
	if g == nil || g.c == nil {
		return 0, 0, false
	}
	var cw, ch C.int
	ok = C.kv_size_guard_refused(g.c, &cw, &ch) != 0
	return int(cw), int(ch), ok
}

func (g *sizeGuard) free() {
	if g != nil && g.c != nil {
		C.kv_size_guard_free(g.c)
		g.c = nil
	}
}

// interrupter aborts blocking FFmpeg demuxer work (avformat_find_stream_info's loop) when ctx is done.
type interrupter struct {
	flag *C.int
	stop func() bool
	done chan struct{}
}

// installInterrupt sets fc's interrupt callback to a C flag raised when ctx is done.
func installInterrupt(ctx context.Context, fc *astiav.FormatContext) *interrupter {
	flag := C.kv_interrupt_install(formatContextPtr(fc))
	if flag == nil {
		return nil
	}
	it := &interrupter{flag: flag, done: make(chan struct{})}
	it.stop = context.AfterFunc(ctx, func() {
		defer close(it.done)
		C.kv_interrupt(flag)
	})
	return it
}

// free releases the flag once no callback can raise it any more; call after the context is closed.
func (it *interrupter) free() {
	if it == nil {
		return
	}
	if !it.stop() {
		<-it.done // the AfterFunc ran or is running
	}
	C.kv_interrupt_free(it.flag)
	it.flag = nil
}

// avioBufferSize is the AVIOContext buffer: 64 KiB, the size go-astiav callers and ffmpeg's file
// protocol use (IO_BUFFER_SIZE is 32 KiB; larger means fewer callbacks).
const avioBufferSize = 64 << 10

// memIO serves a clip in Go memory to the demuxer through kv_mem_io (C read and seek callbacks,
// no Go callback and no global map). The clip is pinned while FFmpeg holds a pointer to it.
type memIO struct {
	c   *C.kv_mem_io
	pin runtime.Pinner
}

// attachMemIO makes data the input of fc (fc->pb, custom IO); reads fail with AVERROR_EXIT once the
// interrupter is raised (it may be nil). data must not be empty; it is pinned until free.
func attachMemIO(fc *astiav.FormatContext, data []byte, it *interrupter) (*memIO, error) {
	var stop *C.int
	if it != nil {
		stop = it.flag
	}
	m := &memIO{}
	m.pin.Pin(&data[0])
	m.c = C.kv_mem_io_attach(formatContextPtr(fc), (*C.uint8_t)(unsafe.Pointer(&data[0])), C.int64_t(len(data)),
		C.int(avioBufferSize), stop)
	if m.c == nil {
		m.pin.Unpin()
		return nil, errors.New("allocating io context failed")
	}
	return m, nil
}

// free releases the AVIOContext and unpins the clip; call after the format context is closed.
func (m *memIO) free() {
	if m == nil {
		return
	}
	C.kv_mem_io_free(m.c)
	m.c = nil
	m.pin.Unpin()
}

// selectVideoStream returns the index of the one real (not attached picture) video stream, the
// number of real video streams, and av_find_best_stream's choice.
func selectVideoStream(fc *astiav.FormatContext) (index, real int) {
	p := formatContextPtr(fc)
	var first C.int
	real = int(C.kv_real_video_streams(p, &first))
	best := int(C.kv_best_video_stream(p))
	if best >= 0 && C.kv_is_attached_pic(p, C.int(best)) == 0 {
		return best, real
	}
	return int(first), real
}

// liveScalers and liveInputs count the FFmpeg objects not yet freed (leak checks in tests).
var liveScalers, liveInputs atomic.Int64

// scaler converts decoded frames to packed rgb24 at native size the way ffmpeg's scale filter does.
type scaler struct {
	c            *C.kv_scaler
	w, h, pixFmt int
}

var errScaler = errors.New("creating swscale context failed")

func newScaler(w, h int, pixFmt astiav.PixelFormat) (*scaler, error) {
	c := C.kv_scaler_new(C.int(w), C.int(h), C.int(pixFmt), C.int(identitySwsFlags))
	if c == nil {
		return nil, fmt.Errorf("scaling %dx%d %s: %w", w, h, pixFmt, errScaler)
	}
	liveScalers.Add(1)
	return &scaler{c: c, w: w, h: h, pixFmt: int(pixFmt)}, nil
}

// convert writes f as w*h*3 packed rgb24 bytes into dst.
func (s *scaler) convert(f *astiav.Frame, dst []byte) error {
	if len(dst) < s.w*s.h*3 || len(dst) == 0 {
		return fmt.Errorf("converting frame: destination of %d bytes for %dx%d", len(dst), s.w, s.h)
	}
	ret := C.kv_scale(s.c, (*C.AVFrame)(f.UnsafePointer()), (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int64_t(len(dst)))
	if err := avError(ret); err != nil {
		return fmt.Errorf("converting frame to rgb24: %w", err)
	}
	return nil
}

func (s *scaler) free() {
	if s != nil && s.c != nil {
		C.kv_scaler_free(s.c)
		s.c = nil
		liveScalers.Add(-1)
	}
}

// nbStreams reads fc->nb_streams through the raw pointer (layout self-check for tests).
func nbStreams(fc *astiav.FormatContext) int { return int(C.kv_nb_streams(formatContextPtr(fc))) }

// decoderAllowList is KV_DECODERS: every decoder a codec context may ever open (the codec
// allow-list narrows it per decoder).
const decoderAllowList = C.KV_DECODERS

// openDrefTest opens data behind lockDown with the mov demuxer's external data references
// enabled (kv_open_dref_test): the io_open layer alone must refuse the reference.
func openDrefTest(data []byte) error {
	if len(data) == 0 {
		return errors.New("empty input")
	}
	p := C.CBytes(data)
	defer C.free(p)
	return avError(C.kv_open_dref_test((*C.uint8_t)(p), C.int64_t(len(data))))
}

// protocolAllowList returns fc's protocol_whitelist and whether it is set (non-NULL).
func protocolAllowList(fc *astiav.FormatContext) (string, bool) {
	p := C.kv_protocol_whitelist(formatContextPtr(fc))
	if p == nil {
		return "", false
	}
	return C.GoString(p), true
}

// errEPERM is AVERROR(EPERM), what the refusing io_open returns.
var errEPERM = avError(-C.EPERM)

// errEINVAL is AVERROR(EINVAL): avformat_open_input's answer to a format off the allow-list.
var errEINVAL = avError(-C.EINVAL)

// streamDisplayMatrix returns the display matrix of stream idx (36 bytes), nil when none.
func streamDisplayMatrix(fc *astiav.FormatContext, idx int) []byte {
	var out [36]C.uint8_t
	if C.kv_stream_display_matrix(formatContextPtr(fc), C.int(idx), &out[0]) == 0 {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(&out[0]), 36)
}

// frameDisplayMatrix returns a decoded frame's display matrix (36 bytes), nil when none.
func frameDisplayMatrix(f *astiav.Frame) []byte {
	var out [36]C.uint8_t
	if C.kv_frame_display_matrix((*C.AVFrame)(f.UnsafePointer()), &out[0]) == 0 {
		return nil
	}
	return C.GoBytes(unsafe.Pointer(&out[0]), 36)
}

// linkedDemuxers and linkedDecoders list what the linked FFmpeg contains (av_demuxer_iterate,
// av_codec_iterate), in FFmpeg's order.
func linkedDemuxers() []string { return cNames(func(i C.int) *C.char { return C.kv_demuxer_name(i) }) }

func linkedDecoders() []string { return cNames(func(i C.int) *C.char { return C.kv_decoder_name(i) }) }

func cNames(at func(C.int) *C.char) []string {
	var out []string
	for i := C.int(0); ; i++ {
		p := at(i)
		if p == nil {
			return out
		}
		out = append(out, C.GoString(p))
	}
}
