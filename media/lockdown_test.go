package media

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/ssrftrap"
	"github.com/kvroute/kvroute/reason"
)

// TestNoNestedOpens decodes every input of ssrftrap straight through the decoder (the path of
// `kvroute identity FILE` and the router): no connection reaches the trap, manifests are
// media_undecodable naming what they are, the Matroska files whose chapters and attachments
// name URLs decode as the clip they hold.
func TestNoNestedOpens(t *testing.T) {
	trap := ssrftrap.Start(t)
	cases, err := ssrftrap.Cases(trap.Port)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(&DecoderConfig{CacheEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		_, err := d.Decode(context.Background(), c.Data, IndexSampler([]int{0}), DecodeOptions{})
		trap.Settle(t)
		if n := trap.Count(); n != 0 {
			t.Fatalf("%s: the decoder reached the trap: %q", c.Name, trap.Log())
		}
		switch {
		case strings.Contains(c.Name, "chapters"):
			if err != nil {
				t.Errorf("%s: %v", c.Name, err)
			}
		case reason.CodeOf(err) != reason.MediaUndecodable:
			t.Errorf("%s: err %v, want media_undecodable", c.Name, err)
		}
	}
}

// TestManifestKind pins what the sniffer names and that real containers are never named.
func TestManifestKind(t *testing.T) {
	cases, err := ssrftrap.Cases(0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"dash": "a DASH manifest (MPD)", "hls_master": "an HLS playlist (M3U)", "hls_media": "an HLS playlist (M3U)",
		"hls_protocols": "an HLS playlist (M3U)", "m3u_plain": "an HLS playlist (M3U)", "ffconcat": "an ffconcat list",
		"sdp": "an SDP session description", "mkv_chapters_attachment": "", "webm_chapters": "", "mp4_external_dref": "",
	}
	for _, c := range cases {
		if got := manifestKind(c.Data); got != want[strings.TrimSuffix(c.Name, "_as_webm")] {
			t.Errorf("%s: %q", c.Name, got)
		}
		if got, want := externalDataRef(c.Data), c.Name == "mp4_external_dref"; got != want {
			t.Errorf("%s: externalDataRef %v", c.Name, got)
		}
	}
	for _, p := range []string{"../testdata/video/vp9_640x360_30fps_10s.mp4", "../testdata/video/vp9_640x360_30fps_10s.mkv",
		"testdata/rotated.mp4", "testdata/with_cover.mkv", "../testdata/video/h264_640x360_30fps_3s.mp4"} {
		b := readFile(t, p)
		if k := manifestKind(b); k != "" || externalDataRef(b) {
			t.Errorf("%s: named %q, external data reference %v", p, k, externalDataRef(b))
		}
	}
	for in, want := range map[string]string{
		"\ufeff  #EXTM3U\n": "an HLS playlist (M3U)", "<?xml version='1.0'?>\n<SMIL>": "a SMIL playlist",
		"[playlist]\nFile1=http://x/": "a PLS playlist", "subfile,,start,0,end,0,,:http://x/": "an FFmpeg protocol reference (subfile,)",
		"concat:a|b": "an FFmpeg protocol reference (concat:)", "\x1aE\xdf\xa3#EXTM3U": "",
	} {
		if got := manifestKind([]byte(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestLockDown checks each layer of kv_lock_down on the FFmpeg linked: the protocol allow-list is
// set and empty (NULL would allow every protocol), and the io_open refuses a nested open the mov
// demuxer makes when external data references are enabled for it.
func TestLockDown(t *testing.T) {
	in, err := openInput(context.Background(), DefaultDecoderConfig(), readFile(t, "../testdata/video/vp9_320x240_2frames.webm"))
	if err != nil {
		t.Fatal(err)
	}
	p, set := protocolAllowList(in.fc)
	in.close()
	if !set || p != "" {
		t.Fatalf("protocol_whitelist %q (set %v), want the empty list", p, set)
	}
	cases, err := ssrftrap.Cases(0)
	if err != nil {
		t.Fatal(err)
	}
	var dref []byte
	for _, c := range cases {
		if c.Name == "mp4_external_dref" {
			dref = c.Data
		}
	}
	before := nestedOpensRefused()
	// The track's samples are in the refused external file: the header still opens.
	if err := openDrefTest(dref); err != nil && !errors.Is(err, errEPERM) {
		t.Logf("open: %v", err)
	}
	if n := nestedOpensRefused() - before; n != 1 {
		t.Fatalf("io_open refused %d nested opens, want 1 (the alias path)", n)
	}
}
