package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// upstream is one trivial worker: it reads the whole request body and answers a fixed chat
// completion after delay, like an engine whose prefill time is not part of the measurement.
type upstream struct {
	srv  *http.Server
	addr string
}

const completion = `{"id":"bench","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`

func startUpstream(delay time.Duration) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completion)
	})
	u := &upstream{srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, addr: ln.Addr().String()}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

// startMedia serves dir (the clips) on a loopback port and returns its base URL.
func startMedia(dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// caddyfile is the benchmark configuration: two sites over the same two upstreams, one routed by
// kvroute (round robin fallback, as in Caddyfile.example), one by plain reverse_proxy round robin.
// Both sites log nothing, so the difference between them is kvroute alone.
func caddyfile(adminPort, kvPort, plainPort int, modelDir, contractFile, w1, w2, extraGlobal string) string {
	return fmt.Sprintf(`{
	admin 127.0.0.1:%[1]d
	auto_https off
	persist_config off
	log {
		output discard
	}
	kvroute {
		embedded_nats {
			port random
		}
		model_dir %[4]s
		media {
			allow_loopback
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
`, adminPort, kvPort, plainPort, modelDir, contractFile, w1, w2, extraGlobal)
}

// startCaddy loads the configuration in this process and returns the two site base URLs.
func startCaddy(modelDir, contract string, w1, w2 *upstream, extraGlobal string) (kv, plain string, stop func(), err error) {
	adminPort, err := freePort()
	if err != nil {
		return "", "", nil, err
	}
	kvPort, err := freePort()
	if err != nil {
		return "", "", nil, err
	}
	plainPort, err := freePort()
	if err != nil {
		return "", "", nil, err
	}
	dir, err := os.MkdirTemp("", "kvroute-bench-")
	if err != nil {
		return "", "", nil, err
	}
	cf := filepath.Join(dir, "contract.json")
	if err := os.WriteFile(cf, []byte(contract), 0o600); err != nil {
		return "", "", nil, err
	}
	cfg := caddyfile(adminPort, kvPort, plainPort, modelDir, cf, w1.addr, w2.addr, extraGlobal)
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		return "", "", nil, fmt.Errorf("adapting: %w", err)
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		return "", "", nil, fmt.Errorf("loading: %w", err)
	}
	stop = func() {
		_ = caddy.Stop()
		_ = os.RemoveAll(dir)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", kvPort), fmt.Sprintf("http://127.0.0.1:%d", plainPort), stop, nil
}
