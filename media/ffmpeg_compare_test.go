package media_test

// Side-by-side comparison with the ffmpeg 5.1 CLI doing the same job as Decoder.Decode: decode
// vp9_640x360_30fps_10s.webm (300 frames), keep the hf_fps frames (golden layout_0000) and convert
// them to rgb24 with swscale bilinear+accurate_rnd+bitexact+full_chroma_int. The test checks that the
// bytes are equal; the benchmarks are the pair docs/benchmarks.md ("Video decode vs ffmpeg") divides.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media"
)

const (
	// compareClip is the clip both sides decode (191 KiB of VP9, 640x360, 30 fps, 300 frames).
	compareClip = "../testdata/video/vp9_640x360_30fps_10s.webm"
	// compareW and compareH are its frame size.
	compareW, compareH = 640, 360
	// ffmpegBin is where the Debian ffmpeg package (Makefile deps) installs the CLI.
	ffmpegBin = "/usr/bin/ffmpeg"
)

// compareIndices are the hf_fps (fps 2, min 4, max 768) indices of the 300-frame clip: golden
// layout.jsonl layout_0000 outputs.indices and video_identity.json's hf_fps vector.
var compareIndices = []int{0, 16, 31, 47, 63, 79, 94, 110, 126, 142, 157, 173, 189, 205, 220, 236, 252, 268, 283, 299}

// ffmpegPath returns the ffmpeg CLI or fails the test: the comparison is never skipped.
func ffmpegPath(tb testing.TB) string {
	tb.Helper()
	if fi, err := os.Stat(ffmpegBin); err == nil && !fi.IsDir() {
		return ffmpegBin
	}
	if p, err := exec.LookPath("ffmpeg"); err == nil {
		return p
	}
	tb.Fatalf("ffmpeg CLI not found at %s nor on PATH: run `make deps` (installs the Debian ffmpeg 5.1 package); "+
		"the ffmpeg comparison needs it and is not skipped", ffmpegBin)
	return ""
}

// ffmpegSelectArgs is the ffmpeg command line for the job. threads "1" makes ffmpeg single-threaded
// like our default (decoder -threads 1 and -filter_threads 1); "auto" leaves ffmpeg's defaults (frame
// threads = cores+1 for the decoder, filter threads = cores). select's n is the index of the frame
// among the decoded (presentable) frames, the same count our indices use; -fps_mode passthrough (the
// 5.1 name of -vsync 0) keeps ffmpeg from duplicating or dropping frames by timestamp. -benchmark
// prints "bench: utime= stime= rtime=" (at log level info) for ffmpeg's transcode loop only: no
// process start, no input open/probe.
func ffmpegSelectArgs(file string, indices []int, threads string) []string {
	terms := make([]string, len(indices))
	for i, n := range indices {
		terms[i] = fmt.Sprintf("eq(n,%d)", n)
	}
	// The quotes protect the commas inside select's expression from the filtergraph parser.
	vf := "select='" + strings.Join(terms, "+") + "',scale=flags=bilinear+accurate_rnd+bitexact+full_chroma_int"
	args := []string{"-nostdin", "-hide_banner", "-nostats", "-v", "info", "-benchmark"}
	if threads != "auto" {
		args = append(args, "-threads", threads, "-filter_threads", threads)
	}
	return append(args, "-i", file, "-vf", vf, "-fps_mode", "passthrough", "-pix_fmt", "rgb24", "-f", "rawvideo", "-")
}

// ffmpegRun is one ffmpeg process's output and costs.
type ffmpegRun struct {
	// CPU is the child's user+system CPU time from its rusage (process start included).
	CPU time.Duration
	// BenchCPU and BenchReal are ffmpeg's own -benchmark utime+stime and rtime.
	BenchCPU, BenchReal time.Duration
}

// benchFFmpeg is runFFmpeg in a benchmark: an error, or output other than want bytes, fails it.
func benchFFmpeg(b *testing.B, bin string, args []string, out *bytes.Buffer, want int) ffmpegRun {
	b.Helper()
	r, err := runFFmpeg(bin, args, out)
	if err != nil {
		b.Fatal(err)
	}
	if out.Len() != want {
		b.Fatalf("ffmpeg wrote %d bytes, want %d", out.Len(), want)
	}
	return r
}

// runFFmpeg runs the ffmpeg CLI with args, writing its stdout into out (reset first).
func runFFmpeg(bin string, args []string, out *bytes.Buffer) (ffmpegRun, error) {
	var errb bytes.Buffer
	out.Reset()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, &errb
	if err := cmd.Run(); err != nil {
		return ffmpegRun{}, fmt.Errorf("running ffmpeg: %w\n%s", err, errb.String())
	}
	var r ffmpegRun
	r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	bench, err := parseFFmpegBench(errb.String())
	if err != nil {
		return ffmpegRun{}, err
	}
	r.BenchCPU = bench["utime"] + bench["stime"]
	r.BenchReal = bench["rtime"]
	return r, nil
}

// parseFFmpegBench reads "bench: utime=0.107s stime=0.004s rtime=0.130s" from ffmpeg's log.
func parseFFmpegBench(log string) (map[string]time.Duration, error) {
	for _, l := range strings.Split(log, "\n") {
		if !strings.HasPrefix(l, "bench: utime=") {
			continue
		}
		m := map[string]time.Duration{}
		for _, f := range strings.Fields(strings.TrimPrefix(l, "bench: ")) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			s, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
			if err != nil {
				return nil, fmt.Errorf("parsing ffmpeg bench field %q: %w", f, err)
			}
			m[k] = time.Duration(s * float64(time.Second))
		}
		if len(m) == 3 {
			return m, nil
		}
	}
	return nil, errors.New("parsing ffmpeg log: no \"bench: utime= stime= rtime=\" line")
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDecodeSelectedMatchesFFmpegCLI: the hf_fps frames of the 10 s VP9 clip from Decoder.Decode are
// the golden layout_0000 indices, and their rgb24 bytes equal the ffmpeg CLI's byte for byte, with
// ffmpeg single-threaded and with its default threads (and both equal the golden P md5).
func TestDecodeSelectedMatchesFFmpegCLI(t *testing.T) {
	bin := ffmpegPath(t)
	data, err := os.ReadFile(compareClip)
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder(t, &media.DecoderConfig{CacheEntries: -1})
	res, err := d.Decode(context.Background(), data, hfFPS, media.DecodeOptions{KeepFrames: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Indices, compareIndices) {
		t.Fatalf("hf_fps indices %v, want golden layout_0000 %v", res.Indices, compareIndices)
	}
	frameBytes := compareW * compareH * 3
	if len(res.Frames) != len(compareIndices) {
		t.Fatalf("%d frames, want %d", len(res.Frames), len(compareIndices))
	}
	ours := bytes.Join(res.Frames, nil)
	if len(ours) != frameBytes*len(compareIndices) {
		t.Fatalf("our P is %d bytes, want %d", len(ours), frameBytes*len(compareIndices))
	}
	const goldenPMD5 = "e3447285c060d5e16174c20372342795" // video_identity.json, this clip, hf_fps
	if got := md5hex(res.Frames); got != goldenPMD5 {
		t.Errorf("our P md5 %s, golden %s", got, goldenPMD5)
	}
	for _, threads := range []string{"1", "auto"} {
		var out bytes.Buffer
		run, err := runFFmpeg(bin, ffmpegSelectArgs(compareClip, compareIndices, threads), &out)
		if err != nil {
			t.Fatalf("threads=%s: %v", threads, err)
		}
		ff := out.Bytes()
		if len(ff) != len(ours) {
			t.Fatalf("threads=%s: ffmpeg wrote %d bytes, we have %d (%d frames of %d)",
				threads, len(ff), len(ours), len(compareIndices), frameBytes)
		}
		for i := range compareIndices {
			a, b := ours[i*frameBytes:(i+1)*frameBytes], ff[i*frameBytes:(i+1)*frameBytes]
			if bytes.Equal(a, b) {
				continue
			}
			off := 0
			for a[off] == b[off] {
				off++
			}
			px := off / 3
			t.Errorf("threads=%s: frame %d (index %d) differs first at byte %d (x=%d y=%d channel %d): ours %d, ffmpeg %d",
				threads, i, compareIndices[i], off, px%compareW, px/compareW, off%3, a[off], b[off])
		}
		t.Logf("ffmpeg threads=%s: %d bytes equal to ours; child CPU %v, -benchmark cpu %v rtime %v",
			threads, len(ff), run.CPU, run.BenchCPU, run.BenchReal)
	}
}

// TestParseFFmpegBench: the -benchmark line is found among other log lines; its absence is an error.
func TestParseFFmpegBench(t *testing.T) {
	m, err := parseFFmpegBench("Output #0, rawvideo, to 'pipe:':\nbench: utime=0.107s stime=0.004s rtime=0.130s\nbench: maxrss=58048kB\n")
	if err != nil {
		t.Fatal(err)
	}
	if m["utime"] != 107*time.Millisecond || m["stime"] != 4*time.Millisecond || m["rtime"] != 130*time.Millisecond {
		t.Fatalf("parsed %v", m)
	}
	if _, err := parseFFmpegBench("bench: maxrss=58048kB\n"); err == nil {
		t.Fatal("no bench line: want an error")
	}
	if _, err := parseFFmpegBench("bench: utime=x stime=0.004s rtime=0.130s\n"); err == nil {
		t.Fatal("bad number: want an error")
	}
}

// BenchmarkDecodeSelectedKvroute: Decoder.Decode (no cache, 1 decoder thread, the default) on the clip
// held in memory: one decode pass, 20 rgb24 conversions and the identity. cpu-ms/op is this
// process's CPU time (wall time is noisy on the shared machine).
func BenchmarkDecodeSelectedKvroute(b *testing.B) {
	data, err := os.ReadFile(compareClip)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("threads=1", func(b *testing.B) {
		d := newDecoder(b, &media.DecoderConfig{CacheEntries: -1, Threads: 1})
		b.ReportAllocs()
		cpu0 := selfCPU()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			res, err := d.Decode(context.Background(), data, hfFPS, media.DecodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if res.RGBBytes != int64(compareW*compareH*3*len(compareIndices)) {
				b.Fatalf("RGB bytes %d", res.RGBBytes)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(selfCPU()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	})
}

// BenchmarkDecodeSelectedFFmpegCLI: the ffmpeg CLI doing the same job, one process per iteration
// (process start, dynamic linking, reading the file and writing 13.8 MB of rgb24 to a pipe included).
// cpu-ms/op is the child's rusage; ff-cpu-ms/op and ff-real-ms/op are ffmpeg's own -benchmark figures
// (its transcode loop only). threads=1 is the fair pair of ours; threads=auto is ffmpeg's default.
func BenchmarkDecodeSelectedFFmpegCLI(b *testing.B) {
	bin := ffmpegPath(b)
	want := compareW * compareH * 3 * len(compareIndices)
	for _, threads := range []string{"1", "auto"} {
		b.Run("threads="+threads, func(b *testing.B) {
			args := ffmpegSelectArgs(compareClip, compareIndices, threads)
			var out bytes.Buffer
			out.Grow(want + 4096)
			var cpu, benchCPU, benchReal time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := benchFFmpeg(b, bin, args, &out, want)
				cpu += r.CPU
				benchCPU += r.BenchCPU
				benchReal += r.BenchReal
			}
			b.StopTimer()
			n := float64(b.N) * float64(time.Millisecond)
			b.ReportMetric(float64(cpu)/n, "cpu-ms/op")
			b.ReportMetric(float64(benchCPU)/n, "ff-cpu-ms/op")
			b.ReportMetric(float64(benchReal)/n, "ff-real-ms/op")
		})
	}
}

// BenchmarkFFmpegCLIStartup: `ffmpeg -version`, the process start and dynamic linking that every
// CLI iteration above pays before it decodes anything.
func BenchmarkFFmpegCLIStartup(b *testing.B) {
	bin := ffmpegPath(b)
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "-hide_banner", "-version")
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// BenchmarkDecodeSelectedInterleaved: the pair above in one loop, one Decode then one ffmpeg process
// (threads=1) per iteration, so both sides see the same load on the shared machine. The ratios are
// kvroute over ffmpeg: ratio-cpu against the ffmpeg process's whole CPU time, ratio-inner-cpu against
// ffmpeg's own -benchmark utime+stime (no process start, no input open/probe), ratio-wall per side.
func BenchmarkDecodeSelectedInterleaved(b *testing.B) {
	bin := ffmpegPath(b)
	data, err := os.ReadFile(compareClip)
	if err != nil {
		b.Fatal(err)
	}
	want := compareW * compareH * 3 * len(compareIndices)
	d := newDecoder(b, &media.DecoderConfig{CacheEntries: -1, Threads: 1})
	args := ffmpegSelectArgs(compareClip, compareIndices, "1")
	var out bytes.Buffer
	out.Grow(want + 4096)
	var oursCPU, oursWall, ffCPU, ffInner, ffWall time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c0, w0 := selfCPU(), time.Now()
		res, err := d.Decode(context.Background(), data, hfFPS, media.DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		oursWall += time.Since(w0)
		oursCPU += selfCPU() - c0
		if res.RGBBytes != int64(want) {
			b.Fatalf("RGB bytes %d, want %d", res.RGBBytes, want)
		}
		w0 = time.Now()
		r := benchFFmpeg(b, bin, args, &out, want)
		ffWall += time.Since(w0)
		ffCPU += r.CPU
		ffInner += r.BenchCPU
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
