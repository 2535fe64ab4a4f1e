package media

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestShareCacheOff: with the decode cache off, 16 concurrent callers of one key run the decode
// once: the leader's decode is held until the 15 others have joined it, then all get its result
// (the joiners marked Cached, their copies their own); the flight is gone afterwards, so a later
// caller decodes again. A leader whose client went away (context.Canceled) hands the decode to a
// waiter, which runs it itself.
func TestShareCacheOff(t *testing.T) {
	d, err := NewDecoder(&DecoderConfig{CacheEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	key := NewCacheKey([]byte("one image"), "image:pixels:v1")
	var decodes atomic.Int64
	release := make(chan struct{})
	decode := func() (*Result, error) {
		decodes.Add(1)
		<-release
		return &Result{Identity: 0x1234, Indices: []int{7}, Stats: Stats{Width: 3840, Height: 2160}}, nil
	}
	const n = 16
	res := make([]*Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := d.Share(context.Background(), key, decode)
			if err != nil {
				t.Error(err)
			}
			res[i] = r
		}()
	}
	waitJoined(d, key, n-1)
	close(release)
	wg.Wait()
	cached := 0
	for _, r := range res {
		if r.Identity != 0x1234 || r.Stats.Width != 3840 || len(r.Indices) != 1 {
			t.Fatalf("result %+v", r)
		}
		if r.Cached {
			cached++
		}
	}
	if decodes.Load() != 1 || cached != n-1 {
		t.Fatalf("%d decodes, %d joined; want 1 and %d", decodes.Load(), cached, n-1)
	}
	res[0].Indices[0] = 99
	if res[1].Indices[0] != 7 {
		t.Fatal("callers share one Indices slice")
	}
	d.mu.Lock()
	left := len(d.inflight)
	d.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d flights left", left)
	}
	if _, err := d.Share(context.Background(), key, decode); err != nil || decodes.Load() != 2 {
		t.Fatalf("a later caller, cache off: %v, %d decodes (want 2)", err, decodes.Load())
	}

	// the leader's client went away: the waiter decodes itself
	hold := make(chan struct{})
	leaderDone := make(chan struct{})
	go func() {
		defer close(leaderDone)
		_, _ = d.Share(context.Background(), key, func() (*Result, error) { <-hold; return nil, context.Canceled })
	}()
	waitFlight(d, key)
	got := make(chan *Result, 1)
	go func() {
		r, err := d.Share(context.Background(), key, decode)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitJoined(d, key, 1)
	close(hold)
	<-leaderDone
	if r := <-got; r == nil || r.Cached || r.Identity != 0x1234 || decodes.Load() != 3 {
		t.Fatalf("after the leader's cancellation: %+v, %d decodes (want its own decode, 3)", r, decodes.Load())
	}
}

// waitFlight waits until a flight of key exists.
func waitFlight(d *Decoder, key CacheKey) { waitJoined(d, key, 0) }

// waitJoined waits until the flight of key exists and n callers joined it.
func waitJoined(d *Decoder, key CacheKey, n int) {
	for {
		d.mu.Lock()
		f, ok := d.inflight[key]
		done := ok && f.waiters >= n
		d.mu.Unlock()
		if done {
			return
		}
		runtime.Gosched()
	}
}
