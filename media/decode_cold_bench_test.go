package media_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media"
)

// coldClip720p60 returns a 1280×720, 60 fps, 20 s VP9 clip (1200 frames), made once with the
// ffmpeg CLI (libvpx-vp9, single-threaded, so the bytes are the same on every run of the same
// libvpx) into the user cache folder: too large for the repository.
func coldClip720p60(b *testing.B) []byte {
	b.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "kvroute", "bench", "vp9_1280x720_60fps_20s.webm")
	if data, err := os.ReadFile(path); err == nil {
		return data
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	tmp := path + ".tmp.webm"
	cmd := exec.Command(ffmpegPath(b), "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=1280x720:r=60:d=20",
		"-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "2M", "-threads", "1", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("making the 720p60 clip: %v: %s", err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkDecodeCold720p60 is one cold decode (no cache, a new decoder) of the 720p60 20 s clip
// with the hf_fps sampler (40 of 1200 frames): the figure docs/benchmarks.md "Static FFmpeg"
// compares between the static FFmpeg 8.1 build and the Debian 12 FFmpeg 5.1 build. cpu=none runs
// with av_force_cpu_flags(0): FFmpeg's SIMD code paths off, what a build without x86 assembly costs.
func BenchmarkDecodeCold720p60(b *testing.B) {
	data := coldClip720p60(b)
	for _, bc := range []struct {
		name  string
		flags int
	}{{"cpu=auto", -1}, {"cpu=none", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			media.ForceCPUFlags(bc.flags)
			defer media.ForceCPUFlags(-1)
			b.ReportAllocs()
			cpu0 := cpuSeconds()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1, DecodeTimeout: 10 * time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				r, err := d.Decode(context.Background(), data, hfFPS, media.DecodeOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if r.Stats.DecodedFrames != 1200 {
					b.Fatalf("decoded %d frames, want 1200", r.Stats.DecodedFrames)
				}
			}
			b.StopTimer()
			b.ReportMetric((cpuSeconds()-cpu0)*1000/float64(b.N), "cpu-ms/op")
		})
	}
}
