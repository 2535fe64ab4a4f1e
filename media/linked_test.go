//go:build !kvroute_system_ffmpeg

package media

import (
	"debug/elf"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestLinkedFFmpeg checks the FFmpeg this binary links (DESIGN.md §6 "The media library", issue
// 24): exactly the allowed demuxers and decoders (AV1 through dav1d: libavcodec's libdav1d
// decoder, deps/ffmpeg/configure.args), and no shared FFmpeg library (it is the static build of
// deps/ffmpeg/build.sh, not a system libav*). The system-FFmpeg build (tag kvroute_system_ffmpeg)
// leaves it out.
func TestLinkedFFmpeg(t *testing.T) {
	if got, want := linkedDemuxers(), []string{"ivf", "matroska,webm", "mov,mp4,m4a,3gp,3g2,mj2"}; !slices.Equal(sorted(got), want) {
		t.Errorf("demuxers %q, want %q", got, want)
	}
	if got, want := linkedDecoders(), []string{"h264", "hevc", "libdav1d", "vp8", "vp9"}; !slices.Equal(sorted(got), want) {
		t.Errorf("decoders %q, want %q", got, want)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range libs {
		if strings.HasPrefix(l, "libav") || strings.HasPrefix(l, "libsw") || strings.HasPrefix(l, "libpostproc") {
			t.Errorf("the test binary loads %s: FFmpeg must be linked statically", l)
		}
	}
	t.Logf("shared libraries: %q", libs)
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
