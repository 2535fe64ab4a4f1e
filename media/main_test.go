package media_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/asticode/go-astiav"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/reason"
)

// childEnv selects a child mode of the test binary: the CPU-flag and memory tests need a fresh
// process (av_force_cpu_flags is process-wide; peak RSS is per process).
const childEnv = "KVROUTE_MEDIA_TEST_CHILD"

func TestMain(m *testing.M) {
	astiav.SetLogLevel(astiav.LogLevelQuiet)
	switch os.Getenv(childEnv) {
	case "rgb-cpuflags-0":
		media.ForceCPUFlags(0)
		os.Exit(childRGB(os.Stdout))
	case "bomb":
		os.Exit(childBomb(os.Stdout))
	}
	os.Exit(m.Run())
}

// cpuFiles are golden clips covering VP8, VP9, 10-bit, BT.709, odd sizes and alpha.
var cpuFiles = []string{
	"fixtures/video/vp8_320x240_25fps_4s.webm",
	"fixtures/video/vp9_640x360_30fps_10s.webm",
	"fixtures/video/vp9_bt709_320x240_24fps_2s.webm",
	"fixtures/video/vp9_333x197_24fps_3s.webm",
	"fixtures/video/field/p2_10bit.webm",
	"fixtures/video/field/odd.webm",
	"fixtures/video/field/alpha.webm",
	"fixtures/video/field/altref_vp8.webm",
}

// childRGB prints "file md5-of-P identity" for every cpuFiles clip under dynamo_max_frames.
func childRGB(w *os.File) int {
	d, err := media.NewDecoder(&media.DecoderConfig{CacheEntries: -1})
	if err != nil {
		fmt.Fprintln(w, "error", err)
		return 1
	}
	fmt.Fprintf(w, "cpuflags %d\n", media.CPUFlags())
	for _, f := range cpuFiles {
		b, err := os.ReadFile(clipPath(f))
		if err != nil {
			fmt.Fprintln(w, "error", err)
			return 1
		}
		r, err := d.Decode(context.Background(), b, dynamoMaxFrames, media.DecodeOptions{KeepFrames: true})
		if err != nil {
			fmt.Fprintln(w, "error", f, err)
			return 1
		}
		fmt.Fprintf(w, "%s %s %s\n", f, md5hex(r.Frames), r.IdentityHex())
	}
	return 0
}

// childBomb decodes bomb_vp8.webm and prints its reason code and the process's peak RSS in KiB.
func childBomb(w *os.File) int {
	b, err := os.ReadFile(clipPath("fixtures/video/field/bomb_vp8.webm"))
	if err != nil {
		fmt.Fprintln(w, "error", err)
		return 1
	}
	d, err := media.NewDecoder(nil)
	if err != nil {
		fmt.Fprintln(w, "error", err)
		return 1
	}
	_, err = d.Decode(context.Background(), b, func(total int, _ media.Stats) ([]int, error) {
		return []int{0}, nil
	}, media.DecodeOptions{})
	fmt.Fprintf(w, "code %s\nmaxrss_kib %d\nerr %v\n", reason.CodeOf(err), peakRSSKiB(), err)
	return 0
}

// peakRSSKiB is VmHWM of /proc/self/status: this process image's peak RSS. (getrusage's ru_maxrss
// is not used: it keeps the parent's peak across the vfork+exec that started this child.)
func peakRSSKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			var v int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:")), " kB"), &v); err == nil {
				return v
			}
		}
	}
	return -1
}

func runChild(t *testing.T, mode string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("child %s: %v\n%s\n%s", mode, err, out.String(), errb.String())
	}
	return out.String()
}

// TestRGBWithoutSIMD: with FFmpeg's CPU flags forced to 0 (no SIMD at all) in a child process, the
// sampled rgb24 bytes and identities equal this process's (SIMD on) and the golden P md5s.
func TestRGBWithoutSIMD(t *testing.T) {
	g := loadGolden(t)
	goldenMD5 := map[string]string{}
	for _, v := range g.Videos {
		for _, vec := range v.Vectors {
			if vec.Sampler == "dynamo_max_frames" {
				goldenMD5[v.File] = vec.PMD5 + " " + vec.Identity
			}
		}
	}
	if media.CPUFlags() == 0 {
		t.Fatal("this process already runs without SIMD; the comparison would be empty")
	}
	child := runChild(t, "rgb-cpuflags-0")
	sc := bufio.NewScanner(strings.NewReader(child))
	lines := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if f[0] == "cpuflags" {
			if f[1] != "0" {
				t.Fatalf("child cpu flags %s, want 0", f[1])
			}
			continue
		}
		if len(f) != 3 {
			t.Fatalf("child line %q", sc.Text())
		}
		lines++
		if got := f[1] + " " + f[2]; got != goldenMD5[f[0]] {
			t.Errorf("%s without SIMD: %s, golden %s", f[0], got, goldenMD5[f[0]])
		}
	}
	if lines != len(cpuFiles) {
		t.Fatalf("child reported %d clips, want %d:\n%s", lines, len(cpuFiles), child)
	}
	// The same clips with SIMD in this process.
	d := newDecoder(t, nil)
	for _, f := range cpuFiles {
		r, err := decodeFile(t, d, clipPath(f), dynamoMaxFrames)
		if err != nil {
			t.Fatal(err)
		}
		if got := md5hex(r.Frames) + " " + r.IdentityHex(); got != goldenMD5[f] {
			t.Errorf("%s with SIMD: %s, golden %s", f, got, goldenMD5[f])
		}
	}
}

// TestBombNoFrameAllocated: bomb_vp8.webm (64x64 container, 16000x16000 key frames) is rejected with
// frame_too_large from the bitstream check, and the process never grew by
// the 384 MB one 16000² yuv420p frame needs (ffmpeg's CLI peaks at ~5 GB on it).
func TestBombNoFrameAllocated(t *testing.T) {
	out := runChild(t, "bomb")
	var code, errText string
	var rss int64
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "code "):
			code = strings.TrimPrefix(l, "code ")
		case strings.HasPrefix(l, "maxrss_kib "):
			fmt.Sscan(strings.TrimPrefix(l, "maxrss_kib "), &rss)
		case strings.HasPrefix(l, "err "):
			errText = l
		}
	}
	if code != string(reason.FrameTooLarge) || !strings.Contains(errText, "16000x16000") {
		t.Fatalf("bomb: code %q, %s", code, errText)
	}
	if rss <= 0 || rss > 256<<10 {
		t.Fatalf("bomb: peak RSS %d KiB, want under 256 MiB", rss)
	}
	t.Logf("bomb rejected: %s; child peak RSS %d KiB", errText, rss)
}
