package mediaresolver_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/routing/mediaport"
	"github.com/kvroute/kvroute/routing/mediaresolver"
)

// identifyAll calls r.Image(url) from n goroutines released at once and returns the results.
func identifyAll(t *testing.T, r *mediaresolver.Resolver, url string, n int) []*mediaport.ImageInfo {
	t.Helper()
	out := make([]*mediaport.ImageInfo, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i], errs[i] = r.Image(context.Background(), url)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
	}
	return out
}

// TestImageSingleFlight: 32 copies of one 2000×2000 PNG (data: URLs, identical bytes) identified
// at once decode once: one decode-cache miss (the decode), 31 hits (the callers that joined it or
// found its entry), every identity DecodeImage's (with the cache off: media TestShareCacheOff).
// Before the single-flight, every copy that looked the cache up before the first
// decode ended decoded again (4–6 decodes of 32 in the operator's test).
func TestImageSingleFlight(t *testing.T) {
	const n = 32
	png := testPNG(t, 2000, 2000)
	want, err := decodePicture(png)
	if err != nil {
		t.Fatal(err)
	}
	url := dataURL("image/png", png)

	r, d, results := newImageResolverSync(t, nil)
	for i, info := range identifyAll(t, r, url, n) {
		if *info != *want {
			t.Fatalf("copy %d: %+v, want %+v", i, *info, *want)
		}
	}
	miss, hit := count(results())
	if miss != 1 || hit != n-1 || r.ImageDecodes() != 1 {
		t.Fatalf("%d copies: %d decode-cache misses, %d hits, %d decodes; want 1, %d, 1", n, miss, hit, r.ImageDecodes(), n-1)
	}
	if st := d.Cache().Stats(); st.Entries != 1 {
		t.Fatalf("decode cache %+v, want one entry", st)
	}

}

// TestImageSingleFlightHeap: the single-flight keeps nothing of a decode once it ended: after
// 64 distinct 256×256 images identified at once (cache off), twice over, the live heap after GC
// is within 4 MiB of what it was after the first round (a flight kept with its decoded pixels
// would hold 64 × 256 KiB = 16 MiB more).
func TestImageSingleFlightHeap(t *testing.T) {
	r, _, _ := newImageResolverSync(t, &media.DecoderConfig{CacheEntries: -1})
	imgs := make([]string, 64)
	for i := range imgs {
		imgs[i] = dataURL("image/png", testPNG(t, 256, 256+i))
	}
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	identify := func() {
		var wg sync.WaitGroup
		for _, u := range imgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.Image(context.Background(), u); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	identify() // warm: pools, the decoder's map buckets
	before := live()
	identify()
	identify()
	after := live()
	if r.ImageDecodes() != 3*64 {
		t.Fatalf("%d decodes, want %d (distinct images never share)", r.ImageDecodes(), 3*64)
	}
	if after > before+4<<20 {
		t.Fatalf("live heap grew from %d to %d bytes over 128 decodes", before, after)
	}
}

// newImageResolverSync is newImageResolver with a decoder of cfg whose cache results are
// recorded under a lock (the callers run concurrently); results returns a copy.
func newImageResolverSync(t *testing.T, cfg *media.DecoderConfig) (*mediaresolver.Resolver, *media.Decoder, func() []string) {
	t.Helper()
	f, err := fetch.New(fetch.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	d, err := media.NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := mediaresolver.New(f, d)
	var mu sync.Mutex
	var results []string
	r.CacheResult = func(s string) {
		mu.Lock()
		results = append(results, s)
		mu.Unlock()
	}
	return r, d, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), results...)
	}
}

func count(results []string) (miss, hit int) {
	for _, s := range results {
		switch s {
		case "miss":
			miss++
		case "hit":
			hit++
		}
	}
	return miss, hit
}
