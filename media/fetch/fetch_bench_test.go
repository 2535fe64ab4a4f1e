package fetch_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/kvroute/kvroute/media/fetch"
)

// BenchmarkFetch measures one fetch of a 1 MiB object per scheme (loopback http, base64 data:).
func BenchmarkFetch(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	srv := newServerB(b, body)
	cfg := fetch.DefaultConfig()
	cfg.AllowLoopback = true
	f, err := fetch.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for name, u := range map[string]string{
		"http": srv + "/x",
		"data": "data:video/webm;base64," + base64.StdEncoding.EncodeToString(body),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				got, err := f.Fetch(context.Background(), u)
				if err != nil || len(got) != len(body) {
					b.Fatalf("%d bytes, %v", len(got), err)
				}
			}
		})
	}
}

// BenchmarkBlocked measures refusing a URL whose name resolves to loopback (resolver lookup and
// address check, no connection).
func BenchmarkBlocked(b *testing.B) {
	cfg := fetch.DefaultConfig()
	cfg.Resolver = newResolver(map[string][]string{"evil.test": {"127.0.0.1"}})
	f, err := fetch.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Fetch(context.Background(), "http://evil.test/"); err == nil {
			b.Fatal("not blocked")
		}
	}
}

func newServerB(b *testing.B, body []byte) string {
	b.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	b.Cleanup(s.Close)
	return s.URL
}
