package media_test

import (
	"context"
	"sync"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/kvroute/kvroute/media"
)

func TestCacheLRU(t *testing.T) {
	c := media.NewCache(2, 1<<20)
	r := func(id kv.Identity) *media.Result {
		return &media.Result{Identity: id, Indices: []int{1, 2}, Metadata: []byte("{}"), Frames: [][]byte{{1}}}
	}
	k1, k2, k3 := media.NewCacheKey([]byte("a"), "s"), media.NewCacheKey([]byte("b"), "s"), media.NewCacheKey([]byte("a"), "t")
	c.Put(k1, r(1))
	c.Put(k2, r(2))
	if got, ok := c.Get(k1); !ok || got.Identity != 1 || !got.Cached || got.Frames != nil {
		t.Fatalf("get k1: %+v %v", got, ok)
	}
	c.Put(k3, r(3)) // evicts k2, the least recently used
	if _, ok := c.Get(k2); ok {
		t.Fatal("k2 not evicted")
	}
	if got, ok := c.Get(k3); !ok || got.Identity != 3 {
		t.Fatal("k3 missing: the sampler string is part of the key")
	}
	got, _ := c.Get(k1)
	got.Indices[0] = 99
	if again, _ := c.Get(k1); again.Indices[0] != 1 {
		t.Fatal("cached indices aliased by a caller")
	}
	if s := c.Stats(); s.Entries != 2 || s.Hits != 4 || s.Misses != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCacheBytesBound(t *testing.T) {
	c := media.NewCache(1000, 1000)
	for i := 0; i < 50; i++ {
		c.Put(media.NewCacheKey([]byte{byte(i)}, "s"), &media.Result{Identity: kv.Identity(i + 1), Metadata: make([]byte, 100)})
	}
	if s := c.Stats(); s.Bytes > 1000 || s.Entries == 0 || s.Entries >= 50 {
		t.Fatalf("stats %+v", s)
	}
	c.Put(media.NewCacheKey([]byte("big"), "s"), &media.Result{Identity: 1, Metadata: make([]byte, 5000)})
	if _, ok := c.Get(media.NewCacheKey([]byte("big"), "s")); ok {
		t.Fatal("entry over the byte bound stored")
	}
}

// TestIdentifyCache: a second Identify of the same bytes and sampler is a cache hit with the same
// identity; another sampler key misses.
func TestIdentifyCache(t *testing.T) {
	d, err := media.NewDecoder(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := readClip(t, "field/qB_320x240_4fps_10f.webm")
	r1, err := d.Identify(context.Background(), b, hfFPS, "hf_fps:2:4:768")
	if err != nil || r1.Cached || r1.IdentityHex() != "631cced86d70ca4f" {
		t.Fatalf("first: %v %+v", err, r1)
	}
	r2, err := d.Identify(context.Background(), b, hfFPS, "hf_fps:2:4:768")
	if err != nil || !r2.Cached || r2.Identity != r1.Identity || string(r2.Metadata) != string(r1.Metadata) || r2.Stats != r1.Stats {
		t.Fatalf("second: %v %+v", err, r2)
	}
	r3, err := d.Identify(context.Background(), b, dynamoMaxFrames, "dynamo:32")
	if err != nil || r3.Cached || r3.IdentityHex() != "8d4f847dbeed8fb6" {
		t.Fatalf("other sampler: %v %+v", err, r3)
	}
}

// TestIdentifyShared: concurrent Identify calls of one clip share one decode and agree.
func TestIdentifyShared(t *testing.T) {
	d, err := media.NewDecoder(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := readClip(t, "field/qB_320x240_4fps_10f.webm")
	const n = 8
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := d.Identify(context.Background(), b, hfFPS, "hf_fps:2:4:768")
			errs[i] = err
			if err == nil {
				ids[i] = r.IdentityHex()
			}
		}(i)
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil || ids[i] != "631cced86d70ca4f" {
			t.Fatalf("call %d: %v %s", i, errs[i], ids[i])
		}
	}
	if s := d.Cache().Stats(); s.Entries != 1 {
		t.Fatalf("cache %+v", s)
	}
}

func TestProbe(t *testing.T) {
	d, err := media.NewDecoder(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := readClip(t, "vp9_640x360_30fps_10s.mp4")
	s, err := d.Probe(context.Background(), b)
	want := media.Stats{Codec: "vp9", Width: 640, Height: 360, AvgFrameRate: media.Rational{Num: 30, Den: 1},
		RealFrameRate: media.Rational{Num: 30, Den: 1}, FPS: 30, Duration: 10, HeaderFrames: 300}
	if err != nil || s != want {
		t.Fatalf("probe %+v, %v\nwant %+v", s, err, want)
	}
	if s.ContainerFrames() != 300 {
		t.Fatalf("container frames %d", s.ContainerFrames())
	}
	b = readClip(t, "field/framebomb.webm")
	s, err = d.Probe(context.Background(), b)
	if err != nil || s.FPS != 1000 || s.AvgFrameRate != (media.Rational{}) || s.Duration != 30 {
		t.Fatalf("framebomb probe %+v, %v", s, err)
	}
}
