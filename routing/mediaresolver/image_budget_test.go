package mediaresolver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/imagetest"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/mediaresolver"
)

// TestImageDecodeReservesBudget: an image's decoded pixels are reserved in the media in-flight
// budget before the decoder allocates them. A 118-byte BMP whose header claims 8192×8192 made
// the decoder allocate 256 MiB before it failed on the missing pixels (the operator's hostile
// input test): now it gets media_busy (a fallback) when the budget cannot hold its pixels, having
// allocated next to nothing, and a real picture still decodes within a small budget, which is
// whole again afterwards.
func TestImageDecodeReservesBudget(t *testing.T) {
	budget := fetch.NewBudget(64<<20, 50*time.Millisecond)
	fc := fetch.DefaultConfig()
	fc.Budget = budget
	f, err := fetch.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := mediaresolver.New(f, nil)
	dataURL := func(mime string, b []byte) string {
		return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
	}
	// A WebP whose VP8X header announces an 8192×8192 canvas (a compressed format: no size check
	// of the file can tell it cannot hold them).
	forged := []byte("RIFF\x00\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00\xff\x1f\x00\xff\x1f\x00")
	binary.LittleEndian.PutUint32(forged[4:], uint32(len(forged)-8))
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	alloc := allocated(func() { _, err = r.Image(context.Background(), dataURL("image/webp", forged)) })
	if reason.CodeOf(err) != reason.MediaBusy || !strings.Contains(err.Error(), "more than the in-flight budget") {
		t.Fatalf("forged 8192x8192 WebP: %v, want media_busy", err)
	}
	if alloc > 4<<20 {
		t.Errorf("refusing the forged WebP allocated %d bytes, want under 4 MiB (its pixels are 256 MiB)", alloc)
	}
	// An uncompressed BMP or a PNG whose file cannot hold the pixels its header announces (the
	// operator's 118-byte BMP claiming 8192×8192) is refused before anything is reserved or
	// allocated, whatever the budget.
	for _, c := range []struct {
		name, mime string
		data       []byte
	}{
		{"BMP", "image/bmp", imagetest.BMPWithSize(t, 8192, 8192)},
		{"BMP top-down", "image/bmp", imagetest.BMPWithSize(t, 8192, -8192)},
		{"PNG", "image/png", pngWithSize(t, 8192, 8192)},
	} {
		alloc := allocated(func() { _, err = r.Image(context.Background(), dataURL(c.mime, c.data)) })
		if reason.CodeOf(err) != reason.MediaUndecodable || !strings.Contains(err.Error(), "cannot hold the pixels its header announces") {
			t.Errorf("forged %d-byte %s: %v, want media_undecodable", len(c.data), c.name, err)
		}
		if alloc > 4<<20 {
			t.Errorf("refusing the forged %s allocated %d bytes, want under 4 MiB", c.name, alloc)
		}
	}

	// While others hold the budget, a picture's fetched bytes still fit but its decoded pixels
	// (67×45×12 bytes) do not: media_busy from the decode's reservation; then it decodes.
	pngBytes := readImage(t, "picture.png")
	held, err := f.Reserve(context.Background(), 64<<20-int64(len(pngBytes))-1000)
	if err != nil {
		t.Fatal(err)
	}
	png := dataURL("image/png", pngBytes)
	if _, err := r.Image(context.Background(), png); reason.CodeOf(err) != reason.MediaBusy || !strings.Contains(err.Error(), "at the budget") {
		t.Fatalf("picture while the budget is held: %v, want media_busy", err)
	}
	held()
	info, err := r.Image(context.Background(), png)
	if err != nil || info.Width != 67 || info.Height != 45 {
		t.Fatalf("picture: %+v, %v", info, err)
	}
	if n := budget.Held(); n != 0 {
		t.Errorf("%d bytes still reserved after the decodes", n)
	}
}

// pngWithSize is a real PNG (image/png's encoder, a 4×4 picture) with its IHDR size rewritten
// and the IHDR's CRC made right again (IHDR: bytes 8–32, its type and data 12–28, the CRC 29–32).
func pngWithSize(t *testing.T, w, h uint32) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewNRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}
