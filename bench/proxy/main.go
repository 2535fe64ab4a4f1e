// Command proxy measures what kvroute adds to a request next to a plain Caddy reverse_proxy.
//
// One in-process Caddy serves two sites over the same two trivial upstreams (each answers after
// -delay, 50 ms by default): one site runs the kvroute handler and selection policy (static
// workers with the hub contract, the test model in testdata/golden/qwen3vl-test-model), the other
// a plain reverse_proxy with round robin. A closed-loop Go client sends every request body to
// both sites, alternating which site goes first, so both see the same load on the same machine.
// For each workload and concurrency it prints p50/p99 latency and requests/s of both sites and
// the kvroute/plain ratios. See docs/benchmarks.md.
//
//	go run ./bench/proxy                    # every workload at concurrency 1 and 16
//	go run ./bench/proxy -workloads cold111k -conc 16 -n 64
//	go run ./bench/proxy -workloads image4k,image4kcold,longword -conc 1 -stages
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/kvroute/kvroute"
	"github.com/kvroute/kvroute/internal/testkit/cputime"
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/tokenizer"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/proxy:", err)
		os.Exit(1)
	}
}

func run() error {
	root := flag.String("root", ".", "repository root (holds testdata/)")
	only := flag.String("workloads", "chat4k,cold111k,multiturn100k,video,responses100k,messages100k", "comma-separated workloads to run")
	concs := flag.String("conc", "1,16", "comma-separated client concurrencies")
	n1 := flag.Int("n", 0, "requests per site per run (0: the workload's default, about 20-30 at concurrency 1, 64-160 at 16)")
	delay := flag.Duration("delay", 50*time.Millisecond, "upstream answer delay")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the measured runs (whole process: Caddy, upstreams and client)")
	stages := flag.Bool("stages", false, "after each run, print the kvroute site's mean time per routing stage (from Caddy's /metrics)")
	global := flag.String("kvroute-options", "", "extra lines for the kvroute global option (e.g. \"tokenize_cache_size 0\")")
	imageIdentity := flag.String("image-identity", "", "media image_identity of the kvroute site: pixels (the default) or bytes")
	flag.Parse()

	modelDir := filepath.Join(*root, "testdata/golden/qwen3vl-test-model")
	tok, err := tokenizer.Load(filepath.Join(modelDir, "tokenizer.json"))
	if err != nil {
		return fmt.Errorf("loading the test model's tokenizer (run from the repository root or set -root): %w", err)
	}
	w1, err := startUpstream(*delay)
	if err != nil {
		return err
	}
	w2, err := startUpstream(*delay)
	if err != nil {
		return err
	}
	mediaURL, stopMedia, err := startMedia(filepath.Join(*root, "testdata/video"))
	if err != nil {
		return err
	}
	defer stopMedia()
	mediaOpts := "\t\t\tcodecs vp8 vp9 h264" // workload h264cold
	if *imageIdentity != "" {
		mediaOpts += "\n\t\t\timage_identity " + *imageIdentity
	}
	kv, plain, admin, stop, err := startCaddy(modelDir, layout.HubContractJSON, w1, w2, *global, mediaOpts)
	if err != nil {
		return err
	}
	defer stop()

	g := &docGen{tokensPerWord: 1}
	probe := g.doc(99, 20000)
	g.tokensPerWord = float64(len(tok.Encode(probe))) / float64(len(strings.Fields(probe)))
	systemPrompt = "You are a careful assistant. Answer from the documents the user gives.\n" + g.doc(7, 1000)

	fmt.Printf("kvroute vs plain reverse_proxy, one Caddy, upstreams answer after %v; GOMAXPROCS=%d\n", *delay, runtime.GOMAXPROCS(0))
	fmt.Printf("ratios compare the two sites within one run (same machine load); req/s = concurrency / mean latency (closed loop)\n\n")
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	fmt.Printf("%-14s %4s %5s | %9s %9s %8s | %9s %9s %8s | %6s %6s %6s\n",
		"workload", "conc", "n", "kv p50", "kv p99", "kv r/s", "plain p50", "plain p99", "pl r/s", "p50×", "p99×", "r/s×")
	for _, name := range strings.Split(*only, ",") {
		i := slices.IndexFunc(workloads, func(w workload) bool { return w.name == name })
		if i < 0 {
			return fmt.Errorf("unknown workload %q", name)
		}
		w := workloads[i]
		for _, cs := range strings.Split(*concs, ",") {
			c, err := strconv.Atoi(cs)
			if err != nil || c < 1 {
				return fmt.Errorf("bad concurrency %q", cs)
			}
			n := *n1
			if n == 0 {
				n = defaultN(w.name, c)
			}
			per := max(1, n/c)
			bodies := w.build(g, c, per+1, mediaURL) // the first request of each client warms up
			var before stageTotals
			var f0 int64
			afterWarmUp := func() error { // stage means and faults exclude the warm-up requests
				f0 = cputime.MinorFaults()
				if *stages {
					before, err = readStages(admin)
				}
				return err
			}
			path := w.path
			if path == "" {
				path = "/v1/chat/completions"
			}
			r, err := measure(client, kv, plain, path, bodies, afterWarmUp)
			if err != nil {
				return fmt.Errorf("%s at concurrency %d: %w", w.name, c, err)
			}
			r.print(w.name, c)
			if w.name == "h264cold" {
				// the same frames decoded by the ffmpeg CLI, one process at a time
				ff, err := ffmpegColdDecode(5)
				if err != nil {
					return err
				}
				added := quantile(r.kv, .5) - quantile(r.plain, .5)
				fmt.Printf("%-14s      ffmpeg CLI, same 20 frames (-c:v h264 -threads 1), median of 5: %.1fms; kvroute's added p50 %.1fms = %.2f× ffmpeg\n",
					"", float64(ff)/1e6, float64(added)/1e6, float64(added)/float64(ff))
			}
			if *stages {
				after, err := readStages(admin)
				if err != nil {
					return err
				}
				printStageMeans(before, after)
				fmt.Printf("%-14s      page faults per request pair (whole process): %.0f\n", "", float64(cputime.MinorFaults()-f0)/float64(len(r.kv)))
			}
		}
	}
	fmt.Println()
	for _, w := range workloads {
		fmt.Printf("  %-14s %s\n", w.name, w.about)
	}
	return nil
}

// defaultN keeps a full default run to a few minutes on a loaded 2-core machine.
func defaultN(name string, conc int) int {
	if conc == 1 {
		if name == "cold111k" || name == "multiturn100k" || name == "responses100k" || name == "messages100k" {
			return 20
		}
		if name == "longword" {
			return 4
		}
		return 30
	}
	if name == "longword" {
		return 16
	}
	if name == "cold111k" || name == "multiturn100k" || name == "responses100k" || name == "messages100k" {
		return 64
	}
	return 128
}

// result holds the latencies of one workload at one concurrency.
type result struct {
	conc      int
	kv, plain []time.Duration
	fallbacks map[string]int // kvroute site: X-Kvroute-Fallback values ("" = routed exactly)
}

func measure(client *http.Client, kv, plain, path string, bodies [][][]byte, afterWarmUp func() error) (*result, error) {
	res := &result{conc: len(bodies), fallbacks: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, len(bodies))
	// warm-up: the first body of each client, to both sites, not measured
	for _, bs := range bodies {
		for _, base := range []string{kv, plain} {
			if _, _, err := post(client, base, path, bs[0]); err != nil {
				return nil, err
			}
		}
	}
	if err := afterWarmUp(); err != nil {
		return nil, err
	}
	for _, bs := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, b := range bs[1:] {
				sites := [2]string{kv, plain}
				if i%2 == 1 {
					sites = [2]string{plain, kv}
				}
				for _, base := range sites {
					d, fb, err := post(client, base, path, b)
					if err != nil {
						errc <- err
						return
					}
					mu.Lock()
					if base == kv {
						res.kv = append(res.kv, d)
						res.fallbacks[fb]++
					} else {
						res.plain = append(res.plain, d)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return res, <-errc
}

// post sends one request and returns its latency and the kvroute fallback header.
func post(client *http.Client, base, path string, body []byte) (time.Duration, string, error) {
	t0 := time.Now()
	res, err := client.Post(base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	d := time.Since(t0)
	if res.StatusCode != http.StatusOK {
		return 0, "", errors.New(base + ": status " + res.Status + ": " + string(b))
	}
	return d, res.Header.Get("X-Kvroute-Fallback"), nil
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func mean(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(len(ds))
}

func (r *result) print(name string, conc int) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/1e6) }
	kp50, kp99, pp50, pp99 := quantile(r.kv, .5), quantile(r.kv, .99), quantile(r.plain, .5), quantile(r.plain, .99)
	krps := float64(conc) / mean(r.kv).Seconds()
	prps := float64(conc) / mean(r.plain).Seconds()
	fmt.Printf("%-14s %4d %5d | %9s %9s %8.1f | %9s %9s %8.1f | %6.3f %6.3f %6.3f\n",
		name, conc, len(r.kv), ms(kp50), ms(kp99), krps, ms(pp50), ms(pp99), prps,
		float64(kp50)/float64(pp50), float64(kp99)/float64(pp99), krps/prps)
	for fb, k := range r.fallbacks {
		if fb != "" {
			fmt.Printf("%-14s      note: %d kvroute requests fell back (%s)\n", "", k, fb)
		}
	}
}
