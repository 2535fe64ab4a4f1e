package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

// upstream is one trivial worker: it reads the whole request body and answers a fixed chat
// completion after delay, like an engine whose prefill time is not part of the measurement.
type upstream struct {
	srv  *http.Server
	addr string
}

const completion = `{"id":"bench","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`

func startUpstream(delay time.Duration) (*upstream, error) {
	srv, addr, err := caddytest.Serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completion)
	}))
	if err != nil {
		return nil, err
	}
	return &upstream{srv: srv, addr: addr}, nil
}

// startMedia serves dir (the clips) on a loopback port and returns its base URL.
func startMedia(dir string) (string, func(), error) {
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(dir)))
	mux.HandleFunc("/gen/photo.jpg", servePhoto)
	mux.HandleFunc("/gen/h264_720p.mp4", serveH264)
	mux.HandleFunc("/gen/screenshot.png", serveScreenshot)
	photo() // made before any request is timed
	screenshot()
	srv, addr, err := caddytest.Serve(mux)
	if err != nil {
		return "", nil, err
	}
	return "http://" + addr, func() { _ = srv.Close() }, nil
}

// caddyfile is the benchmark configuration: two sites over the same two upstreams, one routed by
// kvroute (round robin fallback, as in Caddyfile.example), one by plain reverse_proxy round robin.
// Both sites log nothing, so the difference between them is kvroute alone.
func caddyfile(adminPort, kvPort, plainPort int, modelDir, contractFile, w1, w2, extraGlobal, extraMedia string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%[1]d
	%[9]s
	kvroute {
		embedded_nats {
			port random
		}
		model_dir %[4]s
		media {
			allow_loopback
%[10]s
		}
%[8]s
		worker w1 {
			endpoint %[6]s
			model m
			engine vllm
			block_size 16
			contract_file %[5]s
		}
		worker w2 {
			endpoint %[7]s
			model m
			engine vllm
			block_size 16
			contract_file %[5]s
		}
	}
}

http://127.0.0.1:%[2]d {
	header {
		defer
		X-Kvroute-Fallback {http.vars.kvroute.fallback}
	}
	kvroute {
		max_body_size 64MiB
	}
	reverse_proxy {
		dynamic kvroute m
		lb_policy kvroute {
			fallback round_robin
		}
	}
}

http://127.0.0.1:%[3]d {
	reverse_proxy %[6]s %[7]s {
		lb_policy round_robin
	}
}
`, adminPort, kvPort, plainPort, modelDir, contractFile, w1, w2, extraGlobal, caddytest.QuietGlobals, extraMedia)
}

// startCaddy loads the configuration in this process and returns the two site base URLs and the
// admin endpoint's.
func startCaddy(modelDir, contract string, w1, w2 *upstream, extraGlobal, extraMedia string) (kv, plain, admin string, stop func(), err error) {
	var ports [3]int // admin, kvroute site, plain site
	for i := range ports {
		if ports[i], err = caddytest.FreePort(); err != nil {
			return "", "", "", nil, err
		}
	}
	adminPort, kvPort, plainPort := ports[0], ports[1], ports[2]
	dir, err := os.MkdirTemp("", "kvroute-bench-")
	if err != nil {
		return "", "", "", nil, err
	}
	cf := filepath.Join(dir, "contract.json")
	if err := os.WriteFile(cf, []byte(contract), 0o600); err != nil {
		return "", "", "", nil, err
	}
	cfg := caddyfile(adminPort, kvPort, plainPort, modelDir, cf, w1.addr, w2.addr, extraGlobal, extraMedia)
	if err := caddytest.Load(cfg); err != nil {
		return "", "", "", nil, err
	}
	stop = func() {
		_ = caddy.Stop()
		_ = os.RemoveAll(dir)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", kvPort), fmt.Sprintf("http://127.0.0.1:%d", plainPort),
		fmt.Sprintf("http://127.0.0.1:%d", adminPort), stop, nil
}
