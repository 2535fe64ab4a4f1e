package mediaresolver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/internal/testkit"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/layout"
)

// hubContract is DESIGN.md §2.3's example contract (hf_fps, 2 fps, hub budgets).
const hubContract = layout.HubContractJSON

func contract(t *testing.T) *layout.Contract {
	t.Helper()
	c, err := layout.ParseContract([]byte(hubContract))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestVideoIdentityGolden: the hf_fps identity of the 10 s VP9 clip equals the oracle's
// (golden/video_identity.json: e3e7a3756ad9d625 over frames 0,16,…,299), for the WebM file, its
// MKV remux and the same bytes fetched over HTTP.
func TestVideoIdentityGolden(t *testing.T) {
	r := testkit.Resolver(t, true)
	c := contract(t)
	srv := httptest.NewServer(http.FileServer(http.Dir("../../testdata/video")))
	defer srv.Close()
	wantIdx := []int{0, 16, 31, 47, 63, 79, 94, 110, 126, 142, 157, 173, 189, 205, 220, 236, 252, 268, 283, 299}
	for _, name := range []string{"vp9_640x360_30fps_10s.webm", "vp9_640x360_30fps_10s.mkv"} {
		data, err := os.ReadFile("../../testdata/video/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, via := range []string{"bytes", "http"} {
			got, err := r.DecodeVideo(context.Background(), data, c)
			if via == "http" {
				got, err = r.Video(context.Background(), srv.URL+"/"+name, c)
			}
			if err != nil {
				t.Fatalf("%s via %s: %v", name, via, err)
			}
			if got.Identity != 0xe3e7a3756ad9d625 || got.DecodedFrames != 300 || got.ContainerFrames != 300 ||
				got.SourceFPS != 30 || got.Width != 640 || got.Height != 360 || got.Codec != "vp9" {
				t.Fatalf("%s via %s: %+v", name, via, got)
			}
			if len(got.Indices) != len(wantIdx) {
				t.Fatalf("indices %v", got.Indices)
			}
			for i := range wantIdx {
				if got.Indices[i] != wantIdx[i] {
					t.Fatalf("indices %v", got.Indices)
				}
			}
		}
	}
}

func TestVideoErrors(t *testing.T) {
	r := testkit.Resolver(t, false)
	c := contract(t)
	h264, err := os.ReadFile("../../testdata/video/h264_640x360_30fps_3s.mp4")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.DecodeVideo(context.Background(), h264, c); reason.CodeOf(err) != reason.UnsupportedCodec {
		t.Fatalf("h264: %v", err)
	}
	if _, err := r.DecodeVideo(context.Background(), []byte("not a video at all"), c); reason.CodeOf(err) != reason.MediaUndecodable {
		t.Fatalf("junk: %v", err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir("../../testdata/video")))
	defer srv.Close()
	if _, err := r.Video(context.Background(), srv.URL+"/vp9_320x240_2frames.webm", c); reason.CodeOf(err) != reason.MediaURLBlocked {
		t.Fatalf("loopback URL without allow_loopback: %v", err)
	}
}

// TestImageIdentity checks the canonical_content_hash layout on a decoded PNG against a hash
// built here from the pixels the test drew.
func TestImageIdentity(t *testing.T) {
	const w, h = 5, 3
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	var pix []byte
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBA{R: uint8(10*x + y), G: uint8(200 - x), B: uint8(7 * y), A: 255}
			img.SetNRGBA(x, y, c)
			pix = append(pix, c.R, c.G, c.B)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, v := range []uint64{3, h, w, 3} {
		_ = binary.Write(&want, binary.LittleEndian, v)
	}
	want.WriteByte(0)
	want.Write(pix)
	got, err := decodePicture(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got.Width != w || got.Height != h || got.Identity != kv.Identity(xxh3.Hash(want.Bytes())) {
		t.Fatalf("got %+v, want identity %016x", got, xxh3.Hash(want.Bytes()))
	}
	if _, err := decodePicture([]byte("not an image")); reason.CodeOf(err) != reason.MediaUndecodable {
		t.Fatalf("broken image: %v", err)
	}
	// A GIF header announcing 25120×28530 pixels is refused before any pixel buffer exists.
	if _, err := decodePicture([]byte("GIF89a broken")); reason.CodeOf(err) != reason.FrameTooLarge {
		t.Fatalf("huge GIF header: %v", err)
	}
}
