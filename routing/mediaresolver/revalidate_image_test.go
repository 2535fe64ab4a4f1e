package mediaresolver_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit"
)

// TestImageRevalidation: an image URL served with validators is fetched whole once; the repeat
// is a conditional request answered 304 and reuses the identity without reading the bytes
// (Revalidated counted); when the object changes (a new ETag), the 200 gives the new picture's
// identity. Without validators every request fetches the image whole.
func TestImageRevalidation(t *testing.T) {
	png, jpg := readImage(t, "picture.png"), readImage(t, "picture.jpg")
	wantPNG, err := decodePicture(png)
	if err != nil {
		t.Fatal(err)
	}
	wantJPG, err := decodePicture(jpg)
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Resolver(t, true)
	revalidated := 0
	r.Revalidated = func() { revalidated++ }
	ctx := context.Background()
	cs := &clipServer{data: png, version: 1, validators: true}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	url := srv.URL + "/picture"
	for i := range 3 {
		info, err := r.Image(ctx, url)
		if err != nil || *info != *wantPNG {
			t.Fatalf("request %d: %+v %v, want %+v", i, info, err, *wantPNG)
		}
	}
	if ok, nm := cs.counts(); ok != 1 || nm != 2 || revalidated != 2 {
		t.Fatalf("validators: %d 200s, %d 304s, %d revalidated; want 1, 2, 2", ok, nm, revalidated)
	}
	cs.set(jpg, 2)
	if info, err := r.Image(ctx, url); err != nil || *info != *wantJPG {
		t.Fatalf("changed object: %+v %v, want %+v", info, err, *wantJPG)
	}
	if ok, nm := cs.counts(); ok != 2 || nm != 2 {
		t.Fatalf("changed object: %d 200s, %d 304s; want 2, 2", ok, nm)
	}

	plain := &clipServer{data: png, version: 1}
	srv2 := httptest.NewServer(plain)
	defer srv2.Close()
	for range 2 {
		if info, err := r.Image(ctx, srv2.URL+"/picture"); err != nil || *info != *wantPNG {
			t.Fatalf("no validators: %+v %v", info, err)
		}
	}
	if ok, nm := plain.counts(); ok != 2 || nm != 0 {
		t.Fatalf("no validators: %d 200s, %d 304s; want 2, 0", ok, nm)
	}
}

// TestConcurrentImageRevalidationsShareOne: 16 requests for a known image URL at once send one
// conditional request between them, as for videos (the server answers after 100 ms, so the
// others join it; at most 2 allowed for a late starter), and all get the identity, counted as
// revalidated. Before, each sent its own (16).
func TestConcurrentImageRevalidationsShareOne(t *testing.T) {
	png := readImage(t, "picture.png")
	want, err := decodePicture(png)
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Resolver(t, true)
	var mu sync.Mutex
	revalidated := 0
	r.Revalidated = func() { mu.Lock(); revalidated++; mu.Unlock() }
	cs := &clipServer{data: png, version: 1, validators: true}
	srv := httptest.NewServer(slowClip{cs, 100 * time.Millisecond})
	defer srv.Close()
	url := srv.URL + "/picture.png"
	ctx := context.Background()
	if _, err := r.Image(ctx, url); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := r.Image(ctx, url)
			if err == nil && *info != *want {
				err = fmt.Errorf("identity %+v, want %+v", *info, *want)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if ok, nm := cs.counts(); ok != 1 || nm > 2 || revalidated != 16 {
		t.Fatalf("16 requests at once: %d full responses, %d not modified, %d reused; want 1, at most 2, 16", ok, nm, revalidated)
	}
}
