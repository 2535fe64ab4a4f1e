package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

// edgeEnv is one in-process Caddy configured as the operator runs it: the directive chain of
// Caddyfile.example (request timeouts, `header { defer }` routing headers, `encode zstd gzip`, the
// kvroute handler, reverse_proxy with lb_policy kvroute, an access log) on a TLS site served with
// Caddy's internal CA, plus the same chain on a plain HTTP site. The workers are static `worker`
// entries of the kvroute app, routed on the test model.
type edgeEnv struct {
	https, http string // https://127.0.0.1:port and http://127.0.0.1:port of the sites
	admin       string
	accessLog   string         // path of the access log file
	caddyLog    string         // path of Caddy's own log (the [ROUTING] lines)
	roots       *x509.CertPool // Caddy's local CA root
	dir         string         // the test's Caddy folder (storage/pki/authorities/local/root.crt)
	// the ports are kept for reload
	adminPort, httpPort, httpsPort int
}

// edgeConfig is what varies between edge tests.
type edgeConfig struct {
	Workers []string // worker endpoints (host:port); worker i is named w<i>
	// Models, when set, gives worker i's model (else qwen), and the site's upstreams are every
	// worker of every model (`dynamic kvroute` without a model).
	Models  []string
	Proxy   string // extra reverse_proxy subdirectives (retries, request_buffers, health checks)
	App     string // extra kvroute app options
	MaxBody string // the kvroute directive's max_body_size; "" is 64MiB
	// ReadTimeout is the kvroute directive's read_timeout ("" is 30s) and ReadBody the server's
	// `timeouts { read_body }` ("" leaves it out, as Caddyfile.example does).
	ReadTimeout, ReadBody string
	// DialTimeout is the proxy transport's dial_timeout; "" is Caddyfile.example's 3s.
	DialTimeout string
}

func (c edgeConfig) caddyfile(dir string, adminPort, httpPort, httpsPort int) string {
	workers := ""
	for i, ep := range c.Workers {
		model := "qwen"
		if i < len(c.Models) {
			model = c.Models[i]
		}
		workers += fmt.Sprintf("\t\tworker w%d {\n\t\t\tendpoint %s\n\t\t\tmodel %s\n\t\t\tengine vllm\n\t\t\tblock_size 16\n\t\t}\n", i, ep, model)
	}
	maxBody := c.MaxBody
	if maxBody == "" {
		maxBody = "64MiB"
	}
	readTimeout, readBody := c.ReadTimeout, c.ReadBody
	if readTimeout == "" {
		readTimeout = "30s"
	}
	if readBody != "" {
		readBody = "\n\t\t\tread_body " + readBody
	}
	dialTimeout := c.DialTimeout
	if dialTimeout == "" {
		dialTimeout = "3s"
	}
	upstreamModel := " qwen"
	if len(c.Models) > 0 {
		upstreamModel = ""
	}
	site := fmt.Sprintf(`{
	encode zstd gzip
	header {
		defer
		X-Kvroute-Worker {http.vars.kvroute.worker}
		X-Kvroute-Overlap-Blocks {http.vars.kvroute.overlap_blocks}
		X-Kvroute-Total-Blocks {http.vars.kvroute.total_blocks}
		X-Kvroute-Fallback {http.vars.kvroute.fallback}
	}
	route /v1/* {
		kvroute {
			max_body_size %s
			read_timeout %s
		}
		reverse_proxy {
			dynamic kvroute%s
			lb_policy kvroute {
				fallback least_conn
			}
%s
			transport http {
				dial_timeout %s
				response_header_timeout 10m
			}
		}
	}
	respond 404
	log {
		output file %s
	}
}`, maxBody, readTimeout, upstreamModel, c.Proxy, dialTimeout, filepath.Join(dir, "access.log"))
	return fmt.Sprintf(`{
	admin 127.0.0.1:%[1]d
	http_port %[2]d
	https_port %[3]d
	persist_config off
	skip_install_trust
	storage file_system %[4]s
	auto_https disable_redirects
	log {
		output file %[9]s
		format json
	}
	servers {
		timeouts {
			read_header 10s%[10]s
			idle 2m
		}
	}
	kvroute {
		embedded_nats {
			port random
		}
		model_dir %[5]s
%[6]s%[7]s
	}
}

https://127.0.0.1:%[3]d {
	tls internal%[8]s

http://127.0.0.1:%[2]d {%[8]s
`, adminPort, httpPort, httpsPort, filepath.Join(dir, "storage"), modelDir, workers, c.App, site[1:], filepath.Join(dir, "caddy.log"), readBody)
}

// startEdge loads cfg into Caddy and waits until the TLS site answers with a certificate of
// Caddy's local CA. Caddy stops at the test's end.
func startEdge(t *testing.T, cfg edgeConfig) *edgeEnv {
	t.Helper()
	dir := t.TempDir()
	adminPort, httpPort, httpsPort := caddytest.Port(t), caddytest.Port(t), caddytest.Port(t)
	caddytest.Start(t, cfg.caddyfile(dir, adminPort, httpPort, httpsPort), nil)
	e := &edgeEnv{https: fmt.Sprintf("https://127.0.0.1:%d", httpsPort), http: fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort), accessLog: filepath.Join(dir, "access.log"), caddyLog: filepath.Join(dir, "caddy.log"),
		dir: dir, adminPort: adminPort, httpPort: httpPort, httpsPort: httpsPort}
	// The internal CA and the site certificate are made in the background after Load.
	rootFile := filepath.Join(dir, "storage", "pki", "authorities", "local", "root.crt")
	// a readiness bound, not a speed check: `tls internal` issues its CA and leaf in the background,
	// which took over 20 s once in a full -race run
	const ready = 60 * time.Second
	deadline := time.Now().Add(ready)
	for {
		if pem, err := os.ReadFile(rootFile); err == nil {
			pool := x509.NewCertPool()
			if pool.AppendCertsFromPEM(pem) {
				e.roots = pool
				c := e.client(false)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.https+"/nothing", nil)
				res, err := c.Do(req)
				cancel()
				if err == nil {
					res.Body.Close()
					c.CloseIdleConnections()
					return e
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS site not ready within %s (root %s)", ready, rootFile)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// client returns an HTTPS client trusting Caddy's local CA; h2 picks HTTP/2, else HTTP/1.1 only.
// Compression is not requested implicitly: tests set Accept-Encoding themselves.
func (e *edgeEnv) client(h2 bool) *http.Client {
	tc := &tls.Config{RootCAs: e.roots, NextProtos: []string{"http/1.1"}}
	tr := &http.Transport{TLSClientConfig: tc, DisableCompression: true, ForceAttemptHTTP2: h2}
	if h2 {
		tc.NextProtos = []string{"h2", "http/1.1"}
	} else {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: caddytest.RetryReset{Base: tr}}
}
