package media_test

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/reason"
)

// FuzzDecode feeds arbitrary bytes to the decode entry point: it must return a result with a non-zero
// identity or an error carrying a reason code, never crash or hang.
func FuzzDecode(f *testing.F) {
	for _, p := range []string{
		"../testdata/video/field/qB_320x240_4fps_10f.webm",
		"../testdata/video/field/bomb_vp8.webm",
		"../testdata/video/field/odd.webm",
		"../testdata/video/vp9_320x240_2frames.webm",
		"testdata/resolution_change.webm",
		"testdata/rotated.mp4",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x1a, 0x45, 0xdf, 0xa3})
	f.Add([]byte{})
	d, err := media.NewDecoder(&media.DecoderConfig{
		MaxWidth: 1024, MaxHeight: 1024, MaxDecodedFrames: 300, MaxRGBBytes: 64 << 20,
		DecodeTimeout: 5 * time.Second, CacheEntries: -1,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r, err := d.Decode(context.Background(), data, dynamoMaxFrames, media.DecodeOptions{})
		runtime.ReadMemStats(&after)
		// Go allocations stay within the RGB cap plus a little per input byte: no buffer is
		// sized from what the container claims (FFmpeg's own buffers are bounded by max_pixels).
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20+2*uint64(len(data))+8<<20 {
			t.Fatalf("decoding %d bytes allocated %d bytes on the Go heap", len(data), alloc)
		}
		if err != nil {
			if reason.CodeOf(err) == "" {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if r.Identity == 0 || len(r.Indices) == 0 || r.RGBBytes != int64(len(r.Indices))*int64(r.Stats.Width)*int64(r.Stats.Height)*3 {
			t.Fatalf("bad result %+v", r)
		}
	})
}
