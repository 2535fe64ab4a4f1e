package mediaresolver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"runtime"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
	"github.com/kvroute/kvroute/routing/mediaport"
	"github.com/kvroute/kvroute/routing/mediaresolver"
)

// newImageResolver is a resolver over a default fetcher and a decoder with the default decode
// cache, recording every cache result.
func newImageResolver(t *testing.T, mode mediaresolver.ImageIdentity) (*mediaresolver.Resolver, *media.Decoder, *[]string) {
	t.Helper()
	f, err := fetch.New(fetch.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	d, err := media.NewDecoder(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := mediaresolver.New(f, d)
	r.ImageIdentity = mode
	var results []string
	r.CacheResult = func(s string) { results = append(results, s) }
	return r, d, &results
}

// testPNG is a w×h opaque PNG whose pixels vary (it compresses, yet decodes to w·h·4 bytes).
func testPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURL(mime string, b []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestImagePixelsCached: with image_identity pixels, a repeated image is one decode-cache hit in
// the video decode cache (same identity and size as its decode, which is DecodeImage's), counted
// as "hit"; the same picture in another encoding is a miss with the same pixel identity; a hit
// costs a hash of the bytes, not a decode (it allocates under a tenth of the miss).
func TestImagePixelsCached(t *testing.T) {
	r, d, results := newImageResolver(t, mediaresolver.ImagePixels)
	png := testPNG(t, 1200, 900)
	want, err := decodePicture(png)
	if err != nil {
		t.Fatal(err)
	}
	url := dataURL("image/png", png)
	var first, second *mediaport.ImageInfo
	missAlloc := allocated(func() { first, err = r.Image(context.Background(), url) })
	if err != nil {
		t.Fatal(err)
	}
	hitAlloc := allocated(func() { second, err = r.Image(context.Background(), url) })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Image(context.Background(), url); err != nil {
		t.Fatal(err)
	}
	if *first != *want || *second != *want {
		t.Fatalf("decoded %+v, cached %+v, want %+v", *first, *second, *want)
	}
	if !slices.Equal(*results, []string{"miss", "hit", "hit"}) {
		t.Fatalf("decode cache results %v, want miss, hit, hit", *results)
	}
	if st := d.Cache().Stats(); st.Entries != 1 || st.Hits != 2 || st.Misses != 1 {
		t.Fatalf("decode cache %+v, want one entry, 2 hits, 1 miss", st)
	}
	t.Logf("miss allocated %d bytes, hit %d", missAlloc, hitAlloc)
	if hitAlloc*10 > missAlloc {
		t.Fatalf("a cache hit allocated %d bytes, the decode %d: the hit decoded", hitAlloc, missAlloc)
	}
	// The same pixels as a lossless WebP: another entry, the same identity.
	webp, png2 := readImage(t, "picture_lossless.webp"), readImage(t, "picture.png")
	wa, err := r.Image(context.Background(), dataURL("image/webp", webp))
	if err != nil {
		t.Fatal(err)
	}
	pa, err := r.Image(context.Background(), dataURL("image/png", png2))
	if err != nil {
		t.Fatal(err)
	}
	if wa.Identity != pa.Identity || d.Cache().Stats().Entries != 3 {
		t.Fatalf("WebP %v and PNG %v of one picture: identities differ, or %d cache entries (want 3)", wa.Identity, pa.Identity, d.Cache().Stats().Entries)
	}
}

// TestImageBytesIdentity: with image_identity bytes, the identity is the low 64 bits of XXH3-128
// of the encoded bytes and the size is the header's; the same picture in two encodings has two
// identities; nothing is decoded (a 1200×900 PNG allocates less than its pixels) and the decode
// cache is not used; the header checks stay (format, size, plausibility).
func TestImageBytesIdentity(t *testing.T) {
	r, _, results := newImageResolver(t, mediaresolver.ImageBytes)
	png := testPNG(t, 1200, 900)
	var got *mediaport.ImageInfo
	var err error
	alloc := allocated(func() { got, err = r.Image(context.Background(), dataURL("image/png", png)) })
	if err != nil {
		t.Fatal(err)
	}
	if want := kv.Identity(xxh3.Hash128(png).Lo); got.Identity != want || got.Width != 1200 || got.Height != 900 {
		t.Fatalf("bytes identity %+v, want %v 1200x900", *got, want)
	}
	if alloc > 1200*900 {
		t.Fatalf("bytes mode allocated %d bytes for a %d-byte PNG: it decoded the pixels", alloc, len(png))
	}
	if len(*results) != 0 {
		t.Fatalf("bytes mode used the decode cache: %v", *results)
	}
	w, err := r.Image(context.Background(), dataURL("image/webp", readImage(t, "picture_lossless.webp")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Image(context.Background(), dataURL("image/png", readImage(t, "picture.png")))
	if err != nil {
		t.Fatal(err)
	}
	if w.Identity == p.Identity || w.Width != 67 || w.Height != 45 || p.Width != 67 || p.Height != 45 {
		t.Fatalf("WebP %+v and PNG %+v: want two identities, both 67x45", *w, *p)
	}
	pixels, err := decodePicture(readImage(t, "picture.png"))
	if err != nil {
		t.Fatal(err)
	}
	if pixels.Identity == p.Identity {
		t.Fatal("the bytes identity equals the pixel identity")
	}
	// Header checks: an AVIF is unsupported_codec, random bytes media_undecodable.
	if _, err := r.Image(context.Background(), dataURL("image/avif", readImage(t, "picture.avif"))); reason.CodeOf(err) != reason.UnsupportedCodec {
		t.Fatalf("AVIF in bytes mode: %v, want unsupported_codec", err)
	}
	if _, err := r.Image(context.Background(), dataURL("image/png", []byte("not an image at all"))); reason.CodeOf(err) != reason.MediaUndecodable {
		t.Fatalf("not an image in bytes mode: %v, want media_undecodable", err)
	}
}
