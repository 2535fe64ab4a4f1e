package fetch_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
)

const clip = "../../testdata/video/vp9_320x240_2frames.webm"

func readClip(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(clip)
	if err != nil {
		t.Fatalf("reading clip: %v", err)
	}
	return b
}

func loopbackConfig() *fetch.Config {
	cfg := fetch.DefaultConfig()
	cfg.AllowLoopback = true
	return cfg
}

func TestDefaultConfig(t *testing.T) {
	cfg := fetch.DefaultConfig()
	if cfg.MaxBytes != 256<<20 || cfg.Timeout != 30*time.Second || cfg.MaxRedirects != 5 ||
		cfg.AllowLoopback || cfg.AllowPrivate || cfg.FileRoot != "" || len(cfg.AllowedDomains) != 0 ||
		len(cfg.AllowCIDRs) != 0 || len(cfg.AllowAddrs) != 0 {
		t.Errorf("DefaultConfig() = %+v", cfg)
	}
	if _, err := fetch.New(nil); err != nil {
		t.Errorf("New(nil): %v", err)
	}
}

// TestSameBytesAcrossSchemes: http, https, data: (base64 in several spellings) and file: deliver the
// same bytes of one clip (field report 8: the identity must not depend on how the clip arrives).
func TestSameBytesAcrossSchemes(t *testing.T) {
	want := readClip(t)
	srv := newServer(t, redirector(want))
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(want) }))
	t.Cleanup(tlsSrv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())

	root := t.TempDir()
	if err := os.WriteFile(root+"/clip.webm", want, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loopbackConfig()
	cfg.TLS = &tls.Config{RootCAs: pool}
	cfg.FileRoot = root
	f := newFetcher(t, cfg)

	b64 := base64.StdEncoding.EncodeToString(want)
	var wrapped strings.Builder
	for i := 0; i < len(b64); i += 76 {
		wrapped.WriteString(b64[i:min(i+76, len(b64))])
		wrapped.WriteString("\r\n")
	}
	urls := []string{
		srv.URL + "/a.webm",
		"HTTP://" + strings.TrimPrefix(srv.URL, "http://") + "/a.webm",
		srv.URL + "/to?u=" + url.QueryEscape(srv.URL+"/b.webm"),
		tlsSrv.URL + "/a.webm",
		"data:video/webm;base64," + b64,
		"DATA:video/webm;BASE64," + b64,
		"data:video/webm;base64," + strings.TrimRight(b64, "="),
		"data:video/webm;base64," + wrapped.String(),
		"data:video/webm;base64," + strings.ReplaceAll(b64, "/", "%2F"),
		"data:;base64," + b64,
		"data:video/webm," + url.PathEscape(string(want)),
		"file://" + root + "/clip.webm",
		"file://localhost" + root + "/clip.webm",
		"FILE://" + root + "/./sub/../clip.webm",
	}
	for _, u := range urls {
		got, err := f.Fetch(context.Background(), u)
		if err != nil {
			t.Errorf("%.60s: %v", u, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%.60s: %d bytes, want the clip's %d", u, len(got), len(want))
		}
	}
}

func TestDataURL(t *testing.T) {
	cfg := fetch.DefaultConfig()
	cfg.MaxBytes = 16
	f := newFetcher(t, cfg)
	ok := map[string]string{
		"data:,hello%20world":                   "hello world",
		"data:text/plain,a+b":                   "a+b",
		"data:text/plain;charset=utf-8,x":       "x",
		"data:;base64,aGk=":                     "hi",
		"data:;base64,aGk":                      "hi",
		"data:;base64, a G k = ":                "hi",
		"data:;base64,":                         "",
		"data:,":                                "",
		"data:;base64,MDEyMzQ1Njc4OWFiY2RlZg==": "0123456789abcdef", // exactly MaxBytes
	}
	for u, want := range ok {
		got, err := f.Fetch(context.Background(), u)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", u, got, err, want)
		}
	}
	bad := map[string]reason.Code{
		"data:;base64,@@@@":                        reason.MediaFetchFailed,
		"data:;base64,abcde":                       reason.MediaFetchFailed, // length 1 mod 4
		"data:;base64,aGk=aGk=":                    reason.MediaFetchFailed, // padding inside
		"data:;base64,aG-_":                        reason.MediaFetchFailed, // URL-safe alphabet is not base64
		"data:;base64,aGk%zz":                      reason.MediaFetchFailed,
		"data:nocomma":                             reason.MediaFetchFailed,
		"data:,%zz":                                reason.MediaFetchFailed,
		"data:;base64,MDEyMzQ1Njc4OWFiY2RlZmc=":    reason.MediaTooLarge, // 17 bytes
		"data:,0123456789abcdefg":                  reason.MediaTooLarge,
		"data:;base64," + strings.Repeat("A", 1e6): reason.MediaTooLarge,
	}
	for u, want := range bad {
		_, err := f.Fetch(context.Background(), u)
		wantCode(t, fmt.Sprintf("%.40s", u), err, want)
	}
}

func TestStatusAndConnectFailures(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.WriteHeader(code)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg := loopbackConfig()
	cfg.Resolver = newResolver(nil)
	f := newFetcher(t, cfg)
	for _, code := range []int{204, 200} {
		if b, err := f.Fetch(context.Background(), fmt.Sprintf("%s/%d", srv.URL, code)); err != nil || len(b) != 0 {
			t.Errorf("status %d: %q, %v", code, b, err)
		}
	}
	for _, code := range []int{304, 400, 403, 404, 410, 500, 502, 503} {
		_, err := f.Fetch(context.Background(), fmt.Sprintf("%s/%d", srv.URL, code))
		wantCode(t, fmt.Sprint("status ", code), err, reason.MediaFetchFailed)
		if err != nil && !strings.Contains(err.(*reason.Error).Message, strconv.Itoa(code)) {
			t.Errorf("status %d: message %q does not name the status", code, err.(*reason.Error).Message)
		}
	}
	_, err = f.Fetch(context.Background(), "http://nx.test/")
	wantCode(t, "unknown host", err, reason.MediaFetchFailed)
	_, err = f.Fetch(context.Background(), "http://"+closed+"/")
	wantCode(t, "connection refused", err, reason.MediaFetchFailed)
}

// TestSizeCap: a declared Content-Length over the cap fails before the body is read (the server
// never sends it, so only the early check can end this fetch with media_too_large); an endless body
// without Content-Length fails once the cap is passed.
func TestSizeCap(t *testing.T) {
	stop := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/declared":
			w.Header().Set("Content-Length", strconv.Itoa(64<<10+1))
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select { // send nothing: only the declared length can fail this fetch quickly
			case <-r.Context().Done():
			case <-stop:
			}
		case "/endless":
			chunk := bytes.Repeat([]byte("v"), 4096)
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		case "/exact":
			w.Write(bytes.Repeat([]byte("v"), 64<<10))
		}
	})
	defer close(stop)
	cfg := loopbackConfig()
	cfg.MaxBytes = 64 << 10
	f := newFetcher(t, cfg)
	for _, p := range []string{"/declared", "/endless"} {
		_, err := f.Fetch(context.Background(), srv.URL+p)
		wantCode(t, p, err, reason.MediaTooLarge)
		if got := reason.CodeOf(err).HTTPStatus(); got != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: status %d, want 413", p, got)
		}
	}
	if b, err := f.Fetch(context.Background(), srv.URL+"/exact"); err != nil || len(b) != 64<<10 {
		t.Errorf("/exact: %d bytes, %v", len(b), err)
	}
}

// TestTimeout: a server that stalls before the headers, or after part of the body, ends in
// media_fetch_timeout; a canceled caller context ends in media_fetch_failed wrapping context.Canceled.
func TestTimeout(t *testing.T) {
	stop := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cancel" {
			arrived <- struct{}{}
		}
		if r.URL.Path == "/body" {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	defer close(stop)
	cfg := loopbackConfig()
	cfg.Timeout = 200 * time.Millisecond
	f := newFetcher(t, cfg)
	for _, p := range []string{"/headers", "/body"} {
		_, err := f.Fetch(context.Background(), srv.URL+p)
		wantCode(t, p, err, reason.MediaFetchTimeout)
	}

	cfg.Timeout = time.Hour
	g := newFetcher(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select { // cancel once the request has reached the server
		case <-arrived:
		case <-stop:
		}
		cancel()
	}()
	_, err := g.Fetch(ctx, srv.URL+"/cancel")
	wantCode(t, "canceled", err, reason.MediaFetchFailed)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v does not wrap context.Canceled", err)
	}
}

func TestRedirectLimit(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		if n > 0 {
			http.Redirect(w, r, "/"+strconv.Itoa(n-1), http.StatusFound)
			return
		}
		w.Write([]byte("end" + r.Referer())) // the redirect hop must not leak the previous URL
	})
	cfg := loopbackConfig()
	cfg.MaxRedirects = 3
	f := newFetcher(t, cfg)
	if b, err := f.Fetch(context.Background(), srv.URL+"/3"); err != nil || string(b) != "end" {
		t.Errorf("3 redirects: %q, %v", b, err)
	}
	_, err := f.Fetch(context.Background(), srv.URL+"/4")
	wantCode(t, "4 redirects", err, reason.MediaFetchFailed)

	cfg.MaxRedirects = 0
	g := newFetcher(t, cfg)
	_, err = g.Fetch(context.Background(), srv.URL+"/1")
	wantCode(t, "no redirects allowed", err, reason.MediaFetchFailed)
}

func TestAllowedDomains(t *testing.T) {
	srv := newServer(t, redirector([]byte("ok")))
	p := srv.port()
	cfg := loopbackConfig()
	cfg.AllowedDomains = []string{"*.media.test", "cdn.test"}
	cfg.Resolver = newResolver(map[string][]string{
		"a.media.test": {"127.0.0.1"}, "cdn.test": {"127.0.0.1"}, "evil.test": {"127.0.0.1"},
		"media.test": {"127.0.0.1"}, "x.cdn.test": {"127.0.0.1"},
	})
	f := newFetcher(t, cfg)
	for _, u := range []string{"http://a.media.test:" + p + "/", "http://CDN.test.:" + p + "/",
		"http://a.media.test:" + p + "/to?u=" + url.QueryEscape("http://cdn.test:"+p+"/")} {
		if b, err := f.Fetch(context.Background(), u); err != nil || string(b) != "ok" {
			t.Errorf("%s: %q, %v", u, b, err)
		}
	}
	before := srv.hits.Load()
	for _, u := range []string{"http://evil.test:" + p + "/", "http://media.test:" + p + "/",
		"http://x.cdn.test:" + p + "/", srv.URL + "/"} {
		_, err := f.Fetch(context.Background(), u)
		wantCode(t, u, err, reason.MediaURLBlocked)
	}
	if n := srv.hits.Load() - before; n != 0 {
		t.Errorf("hosts outside the list reached the server %d times", n)
	}
	_, err := f.Fetch(context.Background(), "http://a.media.test:"+p+"/to?u="+url.QueryEscape("http://evil.test:"+p+"/"))
	wantCode(t, "redirect out of the list", err, reason.MediaURLBlocked)
}

// TestProxyEnvIgnored: HTTP_PROXY must not route media fetches (a proxy would connect unchecked).
func TestProxyEnvIgnored(t *testing.T) {
	proxy := listenCounting(t, "127.0.0.1:0")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:"+proxy.port())
	t.Setenv("http_proxy", "http://127.0.0.1:"+proxy.port())
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:"+proxy.port())
	t.Setenv("NO_PROXY", "")
	srv := newServer(t, redirector([]byte("direct")))
	cfg := loopbackConfig()
	cfg.Resolver = newResolver(map[string][]string{"media.test": {"127.0.0.1"}})
	f := newFetcher(t, cfg)
	if b, err := f.Fetch(context.Background(), "http://media.test:"+srv.port()+"/"); err != nil || string(b) != "direct" {
		t.Errorf("fetch: %q, %v", b, err)
	}
	if n := proxy.accepted.Load(); n != 0 {
		t.Errorf("proxy accepted %d connections, want 0", n)
	}
}

// TestConcurrentFetches: one Fetcher serves concurrent fetches (run under -race).
func TestConcurrentFetches(t *testing.T) {
	want := readClip(t)
	srv := newServer(t, redirector(want))
	f := newFetcher(t, loopbackConfig())
	errs := make(chan error, 8)
	for i := 0; i < cap(errs); i++ {
		go func() {
			got, err := f.Fetch(context.Background(), srv.URL+"/c")
			if err == nil && !bytes.Equal(got, want) {
				err = fmt.Errorf("%d bytes, want %d", len(got), len(want))
			}
			errs <- err
		}()
	}
	for i := 0; i < cap(errs); i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
