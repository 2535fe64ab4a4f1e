package media_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media"
)

// BenchmarkDecode: vp9_640x360_30fps_10s.webm (300 frames), hf_fps selects 20 frames: one full
// decode pass plus 20 rgb24 conversions and the identity.
func BenchmarkDecode(b *testing.B) {
	data := readClip(b, "vp9_640x360_30fps_10s.webm")
	for _, bc := range []struct {
		name    string
		sampler media.Sampler
	}{{"hf_fps_20", hfFPS}, {"dynamo_32", dynamoMaxFrames}} {
		b.Run(bc.name, func(b *testing.B) {
			d := newDecoder(b, nil)
			b.ReportAllocs()
			cpu0 := cpuSeconds()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := d.Decode(context.Background(), data, bc.sampler, media.DecodeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			// CPU time is the figure to compare on a shared machine; wall time includes waiting.
			b.ReportMetric((cpuSeconds()-cpu0)*1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(300*b.N)/b.Elapsed().Seconds(), "frames/s")
		})
	}
}

// cpuSeconds is this process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkIdentifyCacheHit: the same bytes and sampler again: XXH3-128 of the 10 s clip plus an LRU
// lookup, no decode.
func BenchmarkIdentifyCacheHit(b *testing.B) {
	data := readClip(b, "vp9_640x360_30fps_10s.webm")
	d, err := media.NewDecoder(nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := d.Identify(context.Background(), data, hfFPS, "hf_fps:2:4:768"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := d.Identify(context.Background(), data, hfFPS, "hf_fps:2:4:768")
		if err != nil || !r.Cached {
			b.Fatal(err)
		}
	}
}
