package mediaresolver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit"
)

// clipServer serves one clip at /clip.webm, with an ETag and Last-Modified when validators is
// set (http.ServeContent answers conditional requests with 304), and counts the 200s and 304s.
type clipServer struct {
	mu         sync.Mutex
	data       []byte
	version    int
	validators bool
	ok, nm     int
}

func (s *clipServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, version, validators := s.data, s.version, s.validators
	s.mu.Unlock()
	mod := time.Time{}
	if validators {
		w.Header().Set("ETag", fmt.Sprintf(`"v%d"`, version))
		mod = time.Date(2026, 1, 1, 0, 0, version, 0, time.UTC)
	}
	// Count the response when its status is written, before any byte reaches the client: counted
	// after ServeContent returned, the client could read the counts before the last response was.
	rec := &statusRecorder{ResponseWriter: w, onStatus: func(code int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch code {
		case http.StatusOK:
			s.ok++
		case http.StatusNotModified:
			s.nm++
		}
	}}
	http.ServeContent(rec, r, "clip.webm", mod, bytes.NewReader(data))
}

func (s *clipServer) set(data []byte, version int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data, s.version = data, version
}

func (s *clipServer) counts() (ok, nm int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ok, s.nm
}

type statusRecorder struct {
	http.ResponseWriter
	status   int
	onStatus func(int) // called once, with the status, before it is written
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
		r.onStatus(code)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// TestVideoRevalidation (issue 14): a clip served with validators is read once; later requests
// revalidate (304) and reuse the identity. Changed content under the same URL is fetched and
// decoded again (new identity, equal to decoding the new bytes); a server without validators is
// fetched every time.
func TestVideoRevalidation(t *testing.T) {
	clip10, err := os.ReadFile("../../testdata/video/vp9_640x360_30fps_10s.webm")
	if err != nil {
		t.Fatal(err)
	}
	clip3, err := os.ReadFile("../../testdata/video/vp9_333x197_24fps_3s.webm")
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Resolver(t, true)
	revalidated := 0
	r.Revalidated = func() { revalidated++ }
	c := contract(t)
	ctx := context.Background()
	want3, err := r.DecodeVideo(ctx, clip3, c)
	if err != nil {
		t.Fatal(err)
	}

	cs := &clipServer{data: clip10, version: 1, validators: true}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	url := srv.URL + "/clip.webm"
	for i := 0; i < 5; i++ {
		info, err := r.Video(ctx, url, c)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%016x", info.Identity); got != "e3e7a3756ad9d625" || len(info.Indices) != 20 {
			t.Fatalf("request %d: identity %s, %d indices; want the golden e3e7a3756ad9d625 over 20 frames", i, got, len(info.Indices))
		}
	}
	if ok, nm := cs.counts(); ok != 1 || nm != 4 || revalidated != 4 {
		t.Fatalf("5 requests: %d full responses, %d not modified, %d revalidated; want 1, 4, 4", ok, nm, revalidated)
	}

	cs.set(clip3, 2) // new content, new validators, same URL
	for i := 0; i < 2; i++ {
		info, err := r.Video(ctx, url, c)
		if err != nil {
			t.Fatal(err)
		}
		if info.Identity != want3.Identity || info.DecodedFrames != want3.DecodedFrames {
			t.Fatalf("after the change: identity %016x (%d frames), want %016x (%d frames)", info.Identity, info.DecodedFrames, want3.Identity, want3.DecodedFrames)
		}
	}
	if ok, nm := cs.counts(); ok != 2 || nm != 5 {
		t.Fatalf("after the change: %d full responses, %d not modified; want 2 and 5", ok, nm)
	}

	plain := &clipServer{data: clip3}
	psrv := httptest.NewServer(plain)
	defer psrv.Close()
	for i := 0; i < 3; i++ {
		info, err := r.Video(ctx, psrv.URL+"/clip.webm", c)
		if err != nil {
			t.Fatal(err)
		}
		if info.Identity != want3.Identity {
			t.Fatalf("no validators: identity %016x, want %016x", info.Identity, want3.Identity)
		}
	}
	if ok, nm := plain.counts(); ok != 3 || nm != 0 {
		t.Fatalf("no validators: %d full responses, %d not modified; want 3 and 0", ok, nm)
	}
}

// slowClip delays every response of a clipServer, so that requests sent together overlap.
type slowClip struct {
	*clipServer
	delay time.Duration
}

func (s slowClip) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	time.Sleep(s.delay)
	s.clipServer.ServeHTTP(w, r)
}

// TestConcurrentRevalidationsShareOne: 16 requests for a known clip at once send one
// conditional request between them (the others wait for its 304 and reuse the result), and
// all get the golden identity. When the clip changed, the waiting requests do not take the
// answer for a 304: each gets the new clip's identity.
func TestConcurrentRevalidationsShareOne(t *testing.T) {
	clip10, err := os.ReadFile("../../testdata/video/vp9_640x360_30fps_10s.webm")
	if err != nil {
		t.Fatal(err)
	}
	clip3, err := os.ReadFile("../../testdata/video/vp9_333x197_24fps_3s.webm")
	if err != nil {
		t.Fatal(err)
	}
	r := testkit.Resolver(t, true)
	var mu sync.Mutex
	revalidated := 0
	r.Revalidated = func() { mu.Lock(); revalidated++; mu.Unlock() }
	c := contract(t)
	ctx := context.Background()
	want3, err := r.DecodeVideo(ctx, clip3, c)
	if err != nil {
		t.Fatal(err)
	}
	cs := &clipServer{data: clip10, version: 1, validators: true}
	srv := httptest.NewServer(slowClip{cs, 100 * time.Millisecond})
	defer srv.Close()
	url := srv.URL + "/clip.webm"
	if _, err := r.Video(ctx, url, c); err != nil {
		t.Fatal(err)
	}
	burst := func() []string {
		var wg sync.WaitGroup
		ids := make([]string, 16)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				info, err := r.Video(ctx, url, c)
				if err != nil {
					ids[i] = err.Error()
					return
				}
				ids[i] = fmt.Sprintf("%016x", info.Identity)
			}()
		}
		wg.Wait()
		return ids
	}
	for i, id := range burst() {
		if id != "e3e7a3756ad9d625" {
			t.Fatalf("request %d: %s, want the golden e3e7a3756ad9d625", i, id)
		}
	}
	if ok, nm := cs.counts(); ok != 1 || nm > 2 || revalidated != 16 {
		t.Fatalf("16 requests at once: %d full responses, %d not modified, %d reused; want 1, at most 2, 16", ok, nm, revalidated)
	}

	cs.set(clip3, 2)
	for i, id := range burst() {
		if id != fmt.Sprintf("%016x", want3.Identity) {
			t.Fatalf("after the change, request %d: %s, want %016x", i, id, want3.Identity)
		}
	}
}
