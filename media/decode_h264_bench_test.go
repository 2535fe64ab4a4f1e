package media_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media"
)

// h264Clip720p returns a 1280×720, 30 fps, 10 s H.264 clip (300 frames; High profile, 3 B-frames,
// MP4), made once with the ffmpeg CLI (libx264, single-threaded, bitexact muxing: the same bytes on
// every run of the same libx264) into the user cache folder, like coldClip720p60: too large for the
// repository. The path is returned too (the ffmpeg CLI reads the file).
func h264Clip720p(b *testing.B) (string, []byte) {
	b.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "kvroute", "bench", "h264_1280x720_30fps_10s.mp4")
	if data, err := os.ReadFile(path); err == nil {
		return path, data
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	tmp := path + ".tmp.mp4"
	cmd := exec.Command(ffmpegPath(b), "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=1280x720:r=30:d=10",
		"-c:v", "libx264", "-preset", "medium", "-profile:v", "high", "-bf", "3", "-b:v", "2M", "-threads", "1",
		"-pix_fmt", "yuv420p", "-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("making the 720p H.264 clip: %v: %s", err, out)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, data
}

// BenchmarkDecodeColdH264720pInterleaved: one cold decode (a new decoder, no cache, 1 decoder
// thread) of the 720p H.264 clip with the hf_fps sampler (20 of 300 frames to rgb24), then the
// ffmpeg CLI doing the same job on the same file (h264 decoder pinned, -threads 1, the same select
// and swscale flags), per iteration, so both sides see the same load on the shared machine. The
// first iteration checks that the two outputs are equal byte for byte. The ratios are kvroute over
// ffmpeg, as BenchmarkDecodeSelectedInterleaved's: ratio-cpu against the ffmpeg process's CPU time,
// ratio-inner-cpu against ffmpeg's own -benchmark utime+stime, ratio-wall per side.
func BenchmarkDecodeColdH264720pInterleaved(b *testing.B) {
	bin := ffmpegPath(b)
	path, data := h264Clip720p(b)
	indices, _ := hfFPS(300, media.Stats{FPS: 30})
	want := 1280 * 720 * 3 * len(indices)
	args := pinDecoder(ffmpegSelectArgs(path, indices, "1"), "h264")
	var out bytes.Buffer
	out.Grow(want + 4096)
	var oursCPU, oursWall, ffCPU, ffInner, ffWall time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0, w0 := selfCPU(), time.Now()
		d, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1, Threads: 1, Codecs: []string{"h264"}})
		if err != nil {
			b.Fatal(err)
		}
		res, err := d.Decode(context.Background(), data, hfFPS, media.DecodeOptions{KeepFrames: i == 0})
		if err != nil {
			b.Fatal(err)
		}
		oursWall += time.Since(w0)
		oursCPU += selfCPU() - c0
		if res.Stats.DecodedFrames != 300 || res.RGBBytes != int64(want) {
			b.Fatalf("decoded %d frames, %d RGB bytes; want 300, %d", res.Stats.DecodedFrames, res.RGBBytes, want)
		}
		w0 = time.Now()
		r := benchFFmpeg(b, bin, args, &out, want)
		ffWall += time.Since(w0)
		ffCPU += r.CPU
		ffInner += r.BenchCPU
		if i == 0 && !bytes.Equal(bytes.Join(res.Frames, nil), out.Bytes()) {
			b.Fatal("our rgb24 frames differ from the ffmpeg CLI's")
		}
	}
	b.StopTimer()
	n := float64(b.N) * float64(time.Millisecond)
	b.ReportMetric(float64(oursCPU)/n, "kvroute-cpu-ms/op")
	b.ReportMetric(float64(ffCPU)/n, "ffmpeg-cpu-ms/op")
	b.ReportMetric(float64(ffInner)/n, "ffmpeg-inner-cpu-ms/op")
	b.ReportMetric(float64(oursCPU)/float64(ffCPU), "ratio-cpu")
	b.ReportMetric(float64(oursCPU)/float64(ffInner), "ratio-inner-cpu")
	b.ReportMetric(float64(oursWall)/float64(ffWall), "ratio-wall")
}

// pinDecoder puts "-c:v DEC" right before ffmpeg's "-i" (an input option pins that input's decoder).
func pinDecoder(args []string, dec string) []string {
	out := make([]string, 0, len(args)+2)
	for _, a := range args {
		if a == "-i" {
			out = append(out, "-c:v", dec)
		}
		out = append(out, a)
	}
	return out
}
