//go:build linux

package media_test

import (
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/asticode/go-astiav"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kvroute/kvroute/media"
)

// captureStderr runs f with file descriptor 2 (where FFmpeg's default log callback writes)
// redirected to a pipe and returns what was written to it.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	if err := syscall.Dup3(int(w.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	f()
	if err := syscall.Dup3(saved, 2, 0); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Close(saved)
	_ = w.Close()
	out := <-got
	_ = r.Close()
	return out
}

// TestFFmpegLogGoesToZap decodes a clip cut in half (the matroska demuxer warns "File ended
// prematurely"): with SetLogger installed nothing reaches stderr, and the line is logged through
// zap at debug level with the decode's request id and the logging component (issue 15).
func TestFFmpegLogGoesToZap(t *testing.T) {
	b, err := os.ReadFile("../testdata/video/vp9_640x360_30fps_10s.webm")
	if err != nil {
		t.Fatal(err)
	}
	truncated := b[:len(b)/2]
	core, logs := observer.New(zapcore.DebugLevel)
	media.SetLogger(zap.New(core))
	t.Cleanup(func() { media.SetLogger(nil) })
	prev := astiav.GetLogLevel()
	astiav.SetLogLevel(astiav.LogLevelInfo) // TestMain silences FFmpeg; an operator's default is info
	t.Cleanup(func() { astiav.SetLogLevel(prev) })

	d := newDecoder(t, nil)
	var decodeErr error
	stderr := captureStderr(t, func() {
		ctx := media.WithRequestID(context.Background(), "req-truncated-1")
		_, decodeErr = d.Decode(ctx, truncated, media.IndexSampler([]int{0, 1}), media.DecodeOptions{})
	})
	if decodeErr != nil {
		t.Fatalf("decoding the first half of the clip: %v", decodeErr)
	}
	if stderr != "" {
		t.Errorf("FFmpeg wrote to stderr: %q", stderr)
	}
	var found bool
	for _, e := range logs.All() {
		if e.Message != "ffmpeg" {
			continue
		}
		f := e.ContextMap()
		if e.Level != zapcore.DebugLevel {
			t.Errorf("ffmpeg line at level %s, want debug", e.Level)
		}
		if strings.Contains(f["line"].(string), "File ended prematurely") {
			found = true
			if f["request_id"] != "req-truncated-1" || f["component"] != "matroska,webm" || f["av_level"] != "error" {
				t.Errorf("fields %v: want request_id req-truncated-1, component matroska,webm, av_level error", f)
			}
		}
	}
	if !found {
		t.Fatalf("no zap entry with the demuxer's warning; got %d entries: %v", logs.Len(), logs.All())
	}

	// A debug-disabled logger: lines are dropped before they cross into Go, still not on stderr.
	media.SetLogger(zap.New(zapcore.NewNopCore()))
	stderr = captureStderr(t, func() {
		_, _ = d.Decode(context.Background(), truncated, media.IndexSampler([]int{0}), media.DecodeOptions{})
	})
	if stderr != "" {
		t.Errorf("FFmpeg wrote to stderr with logging off: %q", stderr)
	}
}
