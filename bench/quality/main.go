// Command quality is kvroute's routing-quality benchmark (docs/benchmarks.md, "Routing quality"):
// it replays seeded workloads through a real in-process Caddy in front of kvroute-sim workers
// (prefill time ∝ uncached prompt tokens, bounded running sequences) once per policy, over fresh
// workers each time, and compares hit rate, time to first token and balance with an offline
// greedy oracle computed from the same request sequence.
//
// Usage (from the repository root):
//
//	go run ./bench/quality                      # both workloads, 300 requests each
//	go run ./bench/quality -n 80 -workloads video
//	go run ./bench/quality -policies 'kvroute,kvroute[cost linear],round_robin,least_conn'
//	go run ./bench/quality -workloads h264 -policies 'kvroute[codecs vp8 vp9 h264],kvroute,kvroute[affinity off]'
//
// A policy is kvroute (the default scheduler), kvroute[OPTIONS] (scheduler options separated by
// ';', e.g. kvroute[cost linear;prefill_load_scale 2]; an option `codecs …` goes to the media
// block instead), round_robin or least_conn (Caddy's own).
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/kvroute/kvroute/bench/internal/simcluster"
	_ "github.com/kvroute/kvroute/caddymodule"
	"github.com/kvroute/kvroute/internal/sim"
)

type options struct {
	n, concurrency, workers, maxTokens, maxRunning, blockSize int
	clips, clipWords, chats, docWords                         int
	seed                                                      uint64
	capacityShare, oracleBound                                float64
	prefillPerToken, prefillDelay, tokenDelay                 time.Duration
	policies, workloads, modelDir, testdata                   string
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 300, "requests per workload")
	flag.IntVar(&o.concurrency, "c", 4, "concurrent clients")
	flag.IntVar(&o.workers, "workers", 4, "simulated workers")
	flag.Uint64Var(&o.seed, "seed", 1, "workload seed")
	flag.IntVar(&o.maxTokens, "max-tokens", 16, "output tokens per request")
	flag.IntVar(&o.maxRunning, "max-running", 2, "sequences running at once per worker (kvroute-sim -max-running)")
	flag.IntVar(&o.blockSize, "block-size", 16, "KV block size")
	flag.DurationVar(&o.prefillPerToken, "prefill-per-token", 100*time.Microsecond, "prefill time per uncached prompt token (kvroute-sim -prefill-per-token)")
	flag.DurationVar(&o.prefillDelay, "prefill-delay", time.Millisecond, "fixed prefill time per request (kvroute-sim -prefill-delay)")
	flag.DurationVar(&o.tokenDelay, "token-delay", 4*time.Millisecond, "decode time per output token (kvroute-sim -token-delay)")
	flag.Float64Var(&o.capacityShare, "capacity", 1.0/3, "each worker's block cache as a share of the workload's distinct blocks")
	flag.Float64Var(&o.oracleBound, "oracle-bound", 1.25, "the oracle keeps each worker within this multiple of the average load")
	flag.IntVar(&o.clips, "clips", 24, "distinct clips (workload video)")
	flag.IntVar(&o.clipWords, "clip-words", 420, "words per clip stand-in (about one token each)")
	flag.IntVar(&o.chats, "chats", 8, "conversations (workload video)")
	flag.IntVar(&o.docWords, "doc-words", 1200, "words per document (workload docs)")
	flag.StringVar(&o.policies, "policies", "kvroute,round_robin,least_conn", "policies to compare, comma-separated")
	flag.StringVar(&o.workloads, "workloads", "video,docs", "workloads: video (repeated clips and chats), docs (distinct documents), h264 (repeated H.264 clips, decoded or not)")
	flag.StringVar(&o.modelDir, "model", sim.DefaultModelDir, "model folder (run from the repository root)")
	flag.StringVar(&o.testdata, "testdata", "testdata", "the repository's testdata folder: workload h264 serves its clips")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
}

// policy is one compared routing policy.
type policy struct {
	Label, Name, Scheduler, Media string
}

func parsePolicies(s string) ([]policy, error) {
	var out []policy
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		p := policy{Label: f, Name: f}
		if name, opts, ok := strings.Cut(f, "["); ok && strings.HasSuffix(opts, "]") {
			p.Name = name
			var sched []string
			for _, o := range strings.Split(strings.TrimSuffix(opts, "]"), ";") {
				if strings.HasPrefix(strings.TrimSpace(o), "codecs ") {
					p.Media = strings.TrimSpace(o)
				} else {
					sched = append(sched, o)
				}
			}
			p.Scheduler = strings.Join(sched, ";")
		}
		switch {
		case p.Name == "kvroute":
		case p.Scheduler == "" && p.Media == "" && (p.Name == "round_robin" || p.Name == "least_conn"):
		default:
			return nil, fmt.Errorf("unknown policy %q", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// result is one policy's figures on one workload.
type result struct {
	Label         string
	HitRate       float64
	P50, P95      time.Duration
	PerWorker     []int
	MaxMin        float64
	Wall          time.Duration
	Errors        int
	Prompt, Cache int
}

func run(ctx context.Context, o options) error {
	pols, err := parsePolicies(o.policies)
	if err != nil {
		return err
	}
	// The workers decode every codec, as a vLLM worker's FFmpeg does; kvroute decodes what the
	// policy's codecs allow.
	fe, err := sim.NewFrontend(&sim.FrontendConfig{ModelDir: o.modelDir, Codecs: []string{"av1", "h264", "hevc", "vp8", "vp9"}})
	if err != nil {
		return fmt.Errorf("loading the model (run from the repository root or set -model): %w", err)
	}
	fmt.Printf("kvroute routing quality: %d workers, %d clients, prefill %v + %v/uncached token (serial), decode %v/token × %d, max %d running per worker, seed %d\n\n",
		o.workers, o.concurrency, o.prefillDelay, o.prefillPerToken, o.tokenDelay, o.maxTokens, o.maxRunning, o.seed)
	wc := workloadConfig{N: o.n, MaxTokens: o.maxTokens, Seed: o.seed, Clips: o.clips, ClipWords: o.clipWords, Chats: o.chats, DocWords: o.docWords}
	for wi, name := range strings.Split(o.workloads, ",") {
		var reqs []request
		switch strings.TrimSpace(name) {
		case "video":
			reqs = videoWorkload(wc)
		case "docs":
			reqs = docsWorkload(wc)
		case "h264":
			base, stop, err := clipServer(o.testdata)
			if err != nil {
				return err
			}
			defer stop()
			reqs = h264Workload(wc, base)
		default:
			return fmt.Errorf("unknown workload %q", name)
		}
		if err := runWorkload(ctx, o, fe, strings.TrimSpace(name), wi, reqs, pols); err != nil {
			return err
		}
	}
	return nil
}

func runWorkload(ctx context.Context, o options, fe *sim.Frontend, name string, wi int, reqs []request, pols []policy) error {
	probe, err := sim.NewBlockCache(&sim.BlockCacheConfig{BlockSize: o.blockSize, Capacity: 1})
	if err != nil {
		return err
	}
	chs, err := chains(ctx, fe, probe, reqs)
	if err != nil {
		return err
	}
	distinct := distinctBlocks(chs)
	capacity := max(1, int(math.Round(o.capacityShare*float64(distinct))))
	kinds := map[string]int{}
	for _, r := range reqs {
		kinds[r.Kind]++
	}
	fmt.Printf("## workload %s: %d requests %v, %d distinct blocks, cache %d blocks per worker\n\n", name, len(reqs), kinds, distinct, capacity)
	fmt.Println("| policy | hit rate | TTFT p50 | TTFT p95 | requests per worker | max/min | wall |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var results []result
	for pi, p := range pols {
		r, err := runPolicy(ctx, o, fe, p, fmt.Sprintf("q%d%d", wi, pi), capacity, reqs)
		if err != nil {
			return fmt.Errorf("workload %s, policy %s: %w", name, p.Label, err)
		}
		results = append(results, r)
		errs := ""
		if r.Errors > 0 {
			errs = fmt.Sprintf(" (%d errors)", r.Errors)
		}
		fmt.Printf("| %s | %.3f | %v | %v | %v | %.2f | %v%s |\n", r.Label, r.HitRate, r.P50.Round(100*time.Microsecond),
			r.P95.Round(100*time.Microsecond), r.PerWorker, r.MaxMin, r.Wall.Round(100*time.Millisecond), errs)
	}
	or, err := greedyOracle(chs, o.workers, capacity, o.blockSize, o.oracleBound)
	if err != nil {
		return err
	}
	ohit := float64(or.Cached) / float64(or.Prompt)
	fmt.Printf("| oracle (greedy, ≤ %.2f× average load) | %.3f | – | – | %v | %.2f | – |\n\n", o.oracleBound, ohit, or.PerWorker, maxMin(or.PerWorker))
	byName := map[string]result{}
	for _, r := range results {
		byName[r.Label] = r
	}
	for _, r := range results {
		if !strings.HasPrefix(r.Label, "kvroute") {
			continue
		}
		line := fmt.Sprintf("%s: hit rate %.2f× oracle, max/min %.2f", r.Label, r.HitRate/ohit, r.MaxMin)
		if rr, ok := byName["round_robin"]; ok {
			line += fmt.Sprintf(", TTFT p50 %.2f× round_robin", ratio(r.P50, rr.P50))
		}
		if lc, ok := byName["least_conn"]; ok {
			line += fmt.Sprintf(", TTFT p95 %.2f× least_conn", ratio(r.P95, lc.P95))
		}
		fmt.Println(line)
	}
	fmt.Println()
	return nil
}

func runPolicy(ctx context.Context, o options, fe *sim.Frontend, p policy, runID string, capacity int, reqs []request) (result, error) {
	cl, err := simcluster.Start(ctx, simcluster.Config{Policy: p.Name, Scheduler: p.Scheduler, Media: p.Media, RunID: runID, Workers: o.workers,
		ModelDir: o.modelDir, Frontend: fe, BlockSize: o.blockSize, Capacity: capacity,
		Sim: sim.Config{Model: "kvroute-sim", PrefillDelay: o.prefillDelay, PrefillPerToken: o.prefillPerToken,
			TokenDelay: o.tokenDelay, MaxRunning: o.maxRunning, MaxTokens: o.maxTokens}})
	if err != nil {
		return result{}, err
	}
	defer cl.Stop()
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: o.concurrency}}
	defer client.CloseIdleConnections()
	start := time.Now()
	outs := drive(ctx, client, cl.Base, reqs, o.concurrency)
	r := result{Label: p.Label, Wall: time.Since(start), PerWorker: make([]int, len(cl.IDs))}
	var ttfts []time.Duration
	for _, out := range outs {
		if out.Err != nil {
			r.Errors++
			continue
		}
		r.Prompt += out.Prompt
		r.Cache += out.Cached
		ttfts = append(ttfts, out.TTFT)
		if i := slices.Index(cl.IDs, out.Worker); i >= 0 {
			r.PerWorker[i]++
		}
	}
	if r.Errors == len(outs) {
		return r, fmt.Errorf("every request failed, first: %v", outs[0].Err)
	}
	r.HitRate = float64(r.Cache) / float64(r.Prompt)
	r.P50, r.P95 = quantile(ttfts, 0.50), quantile(ttfts, 0.95)
	r.MaxMin = maxMin(r.PerWorker)
	return r, nil
}

// quantile is the nearest-rank q-quantile.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}

func maxMin(n []int) float64 {
	if len(n) == 0 {
		return 0
	}
	lo, hi := slices.Min(n), slices.Max(n)
	if lo == 0 {
		return math.Inf(1)
	}
	return float64(hi) / float64(lo)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}
