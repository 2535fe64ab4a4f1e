package media

// #cgo pkg-config: libavutil
// #include <libavutil/log.h>
// #include "avlog.h"
import "C"

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// FFmpeg's log (av_log) is process-wide: its default callback writes raw lines such as
// "[matroska,webm @ 0x7f0c…] File ended prematurely" to stderr, which breaks a JSON log. SetLogger
// replaces that callback (media/avlog.c) and writes each line to a zap logger at debug level, with
// the request id of the decode that logged it when known.

var (
	avLogInstall sync.Once
	avLogger     atomic.Pointer[zap.Logger]
	// avLogOwners maps an FFmpeg context pointer (AVFormatContext, AVCodecContext) to the
	// *string request id of the decode that owns it. Values are unique per input, so a late
	// untag never removes a newer owner of a reused address (CompareAndDelete).
	avLogOwners sync.Map
)

// SetLogger routes FFmpeg's log lines to l at debug level (fields `component`: the logging
// FFmpeg context, e.g. "matroska,webm" or "vp9"; `av_level`: FFmpeg's level name; `request_id`
// when the line comes from a decode whose context carries one, see WithRequestID). From the first
// call on, FFmpeg writes nothing to stderr; lines at levels above av_log_get_level() (default
// info) are dropped, and all lines are dropped without crossing into Go when l is nil or has debug
// disabled. Process-wide: the last call wins (Caddy calls it at every config load). Safe for
// concurrent use.
func SetLogger(l *zap.Logger) {
	avLogInstall.Do(func() { C.kv_av_log_install() })
	if l == nil {
		l = zap.NewNop()
	}
	avLogger.Store(l)
	on := 0
	if l.Core().Enabled(zapcore.DebugLevel) {
		on = 1
	}
	C.kv_av_log_enable(C.int(on))
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id that FFmpeg log lines of decodes under ctx
// are tagged with.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// requestIDFrom returns the request id set by WithRequestID, or "".
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// logTags are the FFmpeg contexts of one input tagged with its request id.
type logTags struct {
	id   *string
	ptrs []unsafe.Pointer
}

// newLogTags returns the tags of a decode under ctx; nil (tagging nothing) without a request id.
func newLogTags(ctx context.Context) *logTags {
	id := requestIDFrom(ctx)
	if id == "" {
		return nil
	}
	return &logTags{id: &id}
}

// tag attributes FFmpeg log lines of context p to the input's request id. nil-safe.
func (t *logTags) tag(p unsafe.Pointer) {
	if t == nil || p == nil {
		return
	}
	avLogOwners.Store(uintptr(p), t.id)
	t.ptrs = append(t.ptrs, p)
}

// untag removes the input's tags; call before (or right after) the contexts are freed. nil-safe.
func (t *logTags) untag() {
	if t == nil {
		return
	}
	for _, p := range t.ptrs {
		avLogOwners.CompareAndDelete(uintptr(p), t.id)
	}
	t.ptrs = nil
}

// avLevels are FFmpeg's log levels (libavutil/log.h), most severe first: a level is named by the
// first entry it does not exceed.
var avLevels = [...]struct {
	max  int
	name string
}{
	{C.AV_LOG_PANIC, "panic"}, {C.AV_LOG_FATAL, "fatal"}, {C.AV_LOG_ERROR, "error"}, {C.AV_LOG_WARNING, "warning"},
	{C.AV_LOG_INFO, "info"}, {C.AV_LOG_VERBOSE, "verbose"}, {C.AV_LOG_DEBUG, "debug"},
}

// avLevelName names an FFmpeg log level; below AV_LOG_DEBUG it is "trace".
func avLevelName(level int) string {
	for _, l := range avLevels {
		if level <= l.max {
			return l.name
		}
	}
	return "trace"
}

// kvAvLog receives one formatted FFmpeg log line from kv_av_log_cb, on any thread. It must not
// block on anything FFmpeg holds: it only reads the owner map and writes to zap.
//
//export kvAvLog
func kvAvLog(avcl unsafe.Pointer, level C.int, item, line *C.char) {
	l := avLogger.Load()
	if l == nil {
		return
	}
	msg := strings.TrimRight(C.GoString(line), "\r\n ")
	if msg == "" {
		return
	}
	c := l.Check(zapcore.DebugLevel, "ffmpeg")
	if c == nil {
		return
	}
	fields := []zap.Field{zap.String("line", msg), zap.String("component", C.GoString(item)),
		zap.String("av_level", avLevelName(int(level)))}
	if avcl != nil {
		if id, ok := avLogOwners.Load(uintptr(avcl)); ok {
			fields = append(fields, zap.String("request_id", *id.(*string)))
		}
	}
	c.Write(fields...)
}
