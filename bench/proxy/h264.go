package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The h264cold workload (issue 29): a cold H.264 720p decode at the edge, against the ffmpeg CLI's
// own decode of the same frames.

// h264ClipPath is the 1280×720, 30 fps, 10 s H.264 clip (300 frames, High profile, 3 B-frames, MP4)
// the media package's BenchmarkDecodeColdH264720pInterleaved makes: the same ffmpeg command (libx264
// single-threaded, bitexact muxing) into the same user cache file, made here when missing.
func h264ClipPath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kvroute", "bench", "h264_1280x720_30fps_10s.mp4")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	tmp := path + ".tmp.mp4"
	cmd := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=s=1280x720:r=30:d=10",
		"-c:v", "libx264", "-preset", "medium", "-profile:v", "high", "-bf", "3", "-b:v", "2M", "-threads", "1",
		"-pix_fmt", "yuv420p", "-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("making the 720p H.264 clip with the ffmpeg CLI (libx264): %v: %s", err, out)
	}
	return path, os.Rename(tmp, path)
}

var h264Clip = sync.OnceValues(func() ([]byte, error) {
	p, err := h264ClipPath()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
})

// serveH264 serves the clip; with ?n=<k> a 16-byte `free` box holding k follows it (a box MP4
// readers skip), so each k is a new file to the decode cache (keyed by the bytes) with the same
// frames: every request decodes cold.
func serveH264(w http.ResponseWriter, r *http.Request) {
	data, err := h264Clip()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if n := r.URL.Query().Get("n"); n != "" {
		k, _ := strconv.ParseUint(n, 10, 64)
		box := make([]byte, 16)
		binary.BigEndian.PutUint32(box, 16)
		copy(box[4:], "free")
		binary.BigEndian.PutUint64(box[8:], k)
		data = append(slices.Clip(data), box...)
	}
	http.ServeContent(w, r, "h264.mp4", time.Time{}, bytes.NewReader(data))
}

// hfFPSIndices are the hub contract's hf_fps indices (fps 2, min 4, max 768) of a clip of total
// frames at fps: np.round(np.linspace(0, total-1, n)), n = int(total/fps·2) clamped.
func hfFPSIndices(total int, fps float64) []int {
	n := max(4, min(int(float64(total)/fps*2), 768, total))
	out := make([]int, n)
	for i := range out {
		v := float64(i) * float64(total-1) / float64(n-1)
		if i == n-1 {
			v = float64(total - 1)
		}
		out[i] = int(math.RoundToEven(v))
	}
	return out
}

// ffmpegColdDecode runs the ffmpeg CLI on the clip n times doing the edge's job: decode with the
// h264 decoder pinned, single-threaded (kvroute's default decoder threads), keep the hf_fps frames,
// convert them with the identity's swscale flags to rgb24 on a pipe. It returns the median wall time
// of one process (start, probe, decode, convert).
func ffmpegColdDecode(n int) (time.Duration, error) {
	path, err := h264ClipPath()
	if err != nil {
		return 0, err
	}
	idx := hfFPSIndices(300, 30)
	terms := make([]string, len(idx))
	for i, k := range idx {
		terms[i] = fmt.Sprintf("eq(n,%d)", k)
	}
	args := []string{"-nostdin", "-hide_banner", "-nostats", "-v", "error", "-threads", "1", "-filter_threads", "1",
		"-c:v", "h264", "-i", path, "-vf", "select='" + strings.Join(terms, "+") + "',scale=flags=bilinear+accurate_rnd+bitexact+full_chroma_int",
		"-fps_mode", "passthrough", "-pix_fmt", "rgb24", "-f", "rawvideo", "-"}
	want := 1280 * 720 * 3 * len(idx)
	var times []time.Duration
	for range n {
		var out bytes.Buffer
		cmd := exec.Command("ffmpeg", args...)
		cmd.Stdout = &out
		t := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("ffmpeg: %w", err)
		}
		times = append(times, time.Since(t))
		if out.Len() != want {
			return 0, fmt.Errorf("ffmpeg wrote %d bytes, want %d", out.Len(), want)
		}
	}
	return quantile(times, .5), nil
}
