package fetch_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
)

// endless streams bytes without a Content-Length until the client goes away.
func endless(w http.ResponseWriter, r *http.Request) {
	buf := make([]byte, 64<<10)
	fl := w.(http.Flusher)
	for r.Context().Err() == nil {
		if _, err := w.Write(buf); err != nil {
			return
		}
		fl.Flush()
	}
}

// stalled sends n bytes without a Content-Length, then sends nothing until the client goes away.
func stalled(n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, n))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

func budgetConfig(maxBytes int64, b *fetch.Budget) *fetch.Config {
	cfg := loopbackConfig()
	cfg.MaxBytes = maxBytes
	cfg.Budget = b
	return cfg
}

// TestEndlessStreamAllocatesAboutTheCap: an endless video_url body ends in media_too_large after
// the fetcher allocated about MaxBytes for it, not the sum of a doubling buffer's steps (issue 12:
// one endless stream peaked at ~3× the cap). TotalAlloc counts every byte allocated meanwhile
// (server and client included), so the bound is exact and needs no peak sampling.
func TestEndlessStreamAllocatesAboutTheCap(t *testing.T) {
	const limit = 32 << 20
	srv := newServer(t, endless)
	f := newFetcher(t, budgetConfig(limit, nil))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := f.Fetch(context.Background(), srv.URL+"/clip.webm")
	runtime.ReadMemStats(&after)
	wantCode(t, "endless stream", err, reason.MediaTooLarge)
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("endless stream to a %d MiB cap: %.1f MiB allocated", limit>>20, float64(alloc)/(1<<20))
	if alloc > limit+limit/4 {
		t.Fatalf("an endless stream allocated %d bytes for a cap of %d (> 1.25×): buffers grow past the bytes received", alloc, limit)
	}
}

// TestBudgetBoundsEndlessStreams: four endless streams at once against a budget smaller than one
// media's cap: no more than the budget is ever reserved, every fetch ends with media_busy within
// slot_wait of the budget filling, the live heap at the peak stays under the budget plus the
// fetcher's fixed overhead, and everything is given back.
func TestBudgetBoundsEndlessStreams(t *testing.T) {
	const budget = 16 << 20
	b := fetch.NewBudget(budget, 200*time.Millisecond)
	srv := newServer(t, endless)
	f := newFetcher(t, budgetConfig(256<<20, b))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	var peakHeld, peakHeap atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if h := b.Held(); h > peakHeld.Load() {
				peakHeld.Store(h)
			}
			runtime.ReadMemStats(&ms)
			if h := int64(ms.HeapAlloc); h > peakHeap.Load() {
				peakHeap.Store(h)
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.Fetch(context.Background(), srv.URL+"/clip.webm")
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	for i, err := range errs {
		wantCode(t, "endless stream "+string(rune('0'+i)), err, reason.MediaBusy)
	}
	grow := peakHeap.Load() - int64(base.HeapAlloc)
	t.Logf("budget %d MiB: peak reserved %.1f MiB, peak heap growth %.1f MiB (sampled every 5 ms, garbage included)",
		budget>>20, float64(peakHeld.Load())/(1<<20), float64(grow)/(1<<20))
	if peakHeld.Load() > budget {
		t.Fatalf("reserved %d bytes, budget %d", peakHeld.Load(), budget)
	}
	// The heap holds the reserved chunks, chunks given back but not yet collected, and a few MiB
	// of client and server buffers: 3× the budget is far below the unbounded case (4 × 256 MiB).
	if grow > 3*budget {
		t.Fatalf("heap grew by %d bytes with a budget of %d", grow, budget)
	}
	if h := b.Held(); h != 0 {
		t.Fatalf("%d bytes still reserved after every fetch ended", h)
	}
}

// TestBudgetStalledStreamMakesOthersBusy: a stream that sends 3 MiB and stalls holds 3 MiB+ of a
// 4 MiB budget; another fetch then falls back with media_busy after slot_wait, a data: URL too;
// once the stalled one ends, fetches succeed again and FetchHeld keeps its bytes reserved until
// release.
func TestBudgetStalledStreamMakesOthersBusy(t *testing.T) {
	const budget = 4 << 20
	b := fetch.NewBudget(budget, 100*time.Millisecond)
	slow := newServer(t, stalled(3<<20))
	small := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 1<<20)) })
	f := newFetcher(t, budgetConfig(64<<20, b))

	ctx, cancel := context.WithCancel(context.Background())
	stalledDone := make(chan error, 1)
	go func() {
		_, err := f.Fetch(ctx, slow.URL+"/stalled.webm")
		stalledDone <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for b.Held() < 3<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled fetch reserved only %d bytes", b.Held())
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	_, err := f.Fetch(context.Background(), small.URL+"/small.webm")
	wantCode(t, "fetch while the budget is held", err, reason.MediaBusy)
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("media_busy after %s, want after slot_wait (100ms)", waited)
	}
	data := "data:video/webm;base64," + base64.StdEncoding.EncodeToString(make([]byte, 1<<20))
	_, err = f.Fetch(context.Background(), data)
	wantCode(t, "data: URL while the budget is held", err, reason.MediaBusy)

	cancel()
	if err := <-stalledDone; reason.CodeOf(err) != reason.MediaFetchFailed {
		t.Fatalf("stalled fetch: %v, want media_fetch_failed (canceled)", err)
	}
	if h := b.Held(); h != 0 {
		t.Fatalf("%d bytes reserved after the stalled fetch ended", h)
	}
	got, release, err := f.FetchHeld(context.Background(), small.URL+"/small.webm")
	if err != nil || len(got) != 1<<20 {
		t.Fatalf("after the stall: %d bytes, %v", len(got), err)
	}
	if h := b.Held(); h < 1<<20 {
		t.Fatalf("FetchHeld: %d bytes reserved while held, want at least %d", h, 1<<20)
	}
	release()
	if h := b.Held(); h != 0 {
		t.Fatalf("%d bytes reserved after release", h)
	}
	// A media larger than the whole budget can never fit: media_busy at once.
	_, err = f.Fetch(context.Background(), "data:;base64,"+strings.Repeat("AAAA", budget/3+1))
	wantCode(t, "data: URL over the budget", err, reason.MediaBusy)
}
