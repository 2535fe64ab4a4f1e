package resolver_test

import (
	"context"
	"encoding/base64"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/media/resolver"
	"github.com/kvroute/kvroute/routing/reason"
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
	r := resolver.New(f, nil)
	dataURL := func(mime string, b []byte) string {
		return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
	}
	forged := bmpWithSize(t, 8192, 8192)
	if len(forged) > 200 {
		t.Fatalf("forged BMP is %d bytes", len(forged))
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = r.Image(context.Background(), dataURL("image/bmp", forged))
	runtime.ReadMemStats(&after)
	if reason.CodeOf(err) != reason.MediaBusy || !strings.Contains(err.Error(), "more than the in-flight budget") {
		t.Fatalf("forged 8192x8192 BMP: %v, want media_busy", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("refusing the forged BMP allocated %d bytes, want under 4 MiB (its pixels are 256 MiB)", alloc)
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
