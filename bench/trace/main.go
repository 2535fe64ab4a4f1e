// Command trace replays a request trace in the Mooncake format (kvcache-ai/Mooncake
// FAST25-release/traces; ../shared/traces/README.md) through one in-process Caddy with kvroute
// (embedded NATS) or Caddy's own policies, in front of fresh kvroute-sim workers per policy, open
// loop at the trace's arrival times divided by -compress, and reports per policy the hit rate (the
// workers' cached_tokens over prompt_tokens), client-side streamed TTFT mean/p50/p95/p99, requests
// per worker and errors (docs/benchmarks.md, "Trace replay").
//
// Each hash id becomes 512 deterministic token ids (seeded by the id, ordinary vocabulary ids of the
// simulated model), so equal hash-id prefixes are equal token prefixes; a request is a streamed
// /v1/completions with that token-id prompt and max_tokens = its output length (capped).
// The simulators' cache blocks come from the slice: the workers' caches together hold -cache-share
// of the slice's distinct blocks.
//
// Usage (from the repository root):
//
//	go run ./bench/trace                                   # the default slice
//	go run ./bench/trace -slices 0:200,1800:200,3600:200 -compress 4
//	go run ./bench/trace -policies 'kvroute,kvroute[cost linear],kvroute[balance_factor -1]'
//	go run ./bench/trace -rounds 3                         # policies alternated, ratios as median and range
//	go run ./bench/trace -rounds 4 -jitter 5ms             # each round on arrivals moved by up to ±5 ms
//
// A policy is kvroute (the default scheduler), kvroute[OPTIONS] (scheduler options separated by
// ';'), round_robin or least_conn (Caddy's own).
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	"github.com/kvroute/kvroute/bench/internal/simcluster"
	_ "github.com/kvroute/kvroute/caddymodule"
	"github.com/kvroute/kvroute/internal/sim"
)

type options struct {
	trace, slices, policies, modelDir         string
	compress, cacheShare                      float64
	workers, blockSize, maxOut, maxRunning    int
	rounds                                    int
	prefillPerToken, prefillDelay, tokenDelay time.Duration
	drain, jitter                             time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.trace, "trace", "../shared/traces/mooncake_synthetic_trace.jsonl", "Mooncake-format trace (JSON lines: timestamp, input_length, output_length, hash_ids)")
	flag.StringVar(&o.slices, "slices", "3000:200@1.2", "slices to replay, START:LENGTH[@COMPRESS] in records, comma-separated (without @: -compress)")
	flag.Float64Var(&o.compress, "compress", 2, "time compression for slices given without @COMPRESS: arrivals at timestamp / compress (the default slice carries its own)")
	flag.IntVar(&o.workers, "workers", 4, "simulated workers")
	flag.Float64Var(&o.cacheShare, "cache-share", 0.5, "the workers' caches together hold this share of the slice's distinct blocks")
	flag.IntVar(&o.blockSize, "block-size", 16, "KV block size of the simulators")
	flag.DurationVar(&o.prefillPerToken, "prefill-per-token", 46*time.Microsecond, "prefill time per uncached prompt token (kvroute-sim -prefill-per-token; serial per worker)")
	flag.DurationVar(&o.prefillDelay, "prefill-delay", time.Millisecond, "fixed prefill time per request (kvroute-sim -prefill-delay)")
	flag.DurationVar(&o.tokenDelay, "token-delay", 2*time.Millisecond, "decode time per output token (kvroute-sim -token-delay)")
	flag.IntVar(&o.maxRunning, "max-running", 0, "sequences running at once per worker (kvroute-sim -max-running; 0 unbounded)")
	flag.IntVar(&o.maxOut, "max-output", 64, "cap on a request's output tokens (the trace's output_length otherwise)")
	flag.DurationVar(&o.drain, "drain", 60*time.Second, "after the last arrival, how long requests may still run before they count as errors")
	flag.StringVar(&o.policies, "policies", "kvroute,kvroute[cost ttft2],kvroute[cost linear],round_robin,least_conn", "policies to compare, comma-separated")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds per slice: every policy once per round, the order reversed every other round (ABC CBA …), same requests and arrivals; ratios reported as median and range over the rounds")
	flag.DurationVar(&o.jitter, "jitter", 0, "move each arrival by up to ± this much, drawn anew per round (the same for every policy of a round): rounds then sample several trajectories instead of repeating one (0: the recorded arrivals)")
	flag.StringVar(&o.modelDir, "model", sim.DefaultModelDir, "model folder (run from the repository root)")
	flag.Parse()
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "trace:", err)
		os.Exit(1)
	}
}

// policy is one compared routing policy.
type policy struct {
	Label, Name, Scheduler string
}

func parsePolicies(s string) ([]policy, error) {
	var out []policy
	for _, f := range splitPolicies(s) {
		p := policy{Label: f, Name: f}
		if name, opts, ok := strings.Cut(f, "["); ok && strings.HasSuffix(opts, "]") {
			p.Name, p.Scheduler = name, strings.TrimSuffix(opts, "]")
		}
		switch {
		case p.Name == "kvroute":
		case p.Scheduler == "" && (p.Name == "round_robin" || p.Name == "least_conn"):
		default:
			return nil, fmt.Errorf("unknown policy %q", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// splitPolicies splits at commas outside brackets.
func splitPolicies(s string) []string {
	var out []string
	depth, from := 0, 0
	for i, c := range s + "," {
		switch {
		case c == '[':
			depth++
		case c == ']':
			depth--
		case c == ',' && depth == 0:
			if f := strings.TrimSpace(s[from:i]); f != "" {
				out = append(out, f)
			}
			from = i + 1
		}
	}
	return out
}

// traceSlice is one replayed slice: records [Start, Start+N), arrivals compressed by Compress.
type traceSlice struct {
	Start, N int
	Compress float64
}

// parseSlices reads START:LENGTH[@COMPRESS][,...]; a slice without @ uses compress.
func parseSlices(s string, compress float64) ([]traceSlice, error) {
	var out []traceSlice
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		sl := traceSlice{Compress: compress}
		var err3 error
		if body, c, ok := strings.Cut(f, "@"); ok {
			f = body
			sl.Compress, err3 = strconv.ParseFloat(c, 64)
		}
		a, b, ok := strings.Cut(f, ":")
		var err1, err2 error
		sl.Start, err1 = strconv.Atoi(a)
		sl.N, err2 = strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || err3 != nil || sl.Start < 0 || sl.N < 1 || !(sl.Compress > 0) || math.IsInf(sl.Compress, 0) {
			return nil, fmt.Errorf("slice %q: want START:LENGTH[@COMPRESS]", f)
		}
		out = append(out, sl)
	}
	return out, nil
}

// result is one policy's figures on one slice.
type result struct {
	Label         string
	HitRate       float64
	TTFT          latency
	PerWorker     []int
	Errors        int
	FirstErr      error
	Wall          time.Duration
	Prompt, Cache int64
}

func run(ctx context.Context, o options) error {
	if o.compress <= 0 || o.workers < 1 || o.cacheShare <= 0 || o.rounds < 1 {
		return fmt.Errorf("-compress, -workers, -cache-share and -rounds must be > 0")
	}
	if o.jitter < 0 {
		return fmt.Errorf("-jitter must be >= 0, got %v", o.jitter)
	}
	pols, err := parsePolicies(o.policies)
	if err != nil {
		return err
	}
	sls, err := parseSlices(o.slices, o.compress)
	if err != nil {
		return err
	}
	f, err := os.Open(o.trace)
	if err != nil {
		return err
	}
	recs, err := parseTrace(f)
	f.Close()
	if err != nil {
		return err
	}
	fe, err := sim.NewFrontend(&sim.FrontendConfig{ModelDir: o.modelDir})
	if err != nil {
		return fmt.Errorf("loading the model (run from the repository root or set -model): %w", err)
	}
	fmt.Printf("kvroute trace replay: %s (%d records), %d workers, prefill %v + %v/uncached token (serial), decode %v/token (output capped at %d), max running %d, default compression %g×\n\n",
		o.trace, len(recs), o.workers, o.prefillDelay, o.prefillPerToken, o.tokenDelay, o.maxOut, o.maxRunning, o.compress)
	for si, sl := range sls {
		part := sliceTrace(recs, sl.Start, sl.N)
		if len(part) == 0 {
			return fmt.Errorf("slice %d:%d is empty (the trace has %d records)", sl.Start, sl.N, len(recs))
		}
		if err := runSlice(ctx, o, fe, si, sl, part, pols); err != nil {
			return err
		}
	}
	return nil
}

func runSlice(ctx context.Context, o options, fe *sim.Frontend, si int, sl traceSlice, part []record, pols []policy) error {
	o.compress = sl.Compress
	st := statsOf(part)
	perBlock := TraceBlock / o.blockSize
	capacity := max(1, int(math.Ceil(o.cacheShare*float64(st.DistinctBlocks*perBlock)/float64(o.workers))))
	dur := time.Duration(float64(st.DurationMS)/o.compress) * time.Millisecond
	offered := float64(st.InputTokens) * (1 - st.Reuse) * float64(o.prefillPerToken) / float64(time.Duration(o.workers)*max(dur, time.Millisecond))
	fmt.Printf("## slice %d:%d@%g — %d requests over %v (%v compressed), input %d tokens/request on average, output %d; %d distinct blocks of %d, ideal reuse %.3f\n",
		sl.Start, sl.N, sl.Compress, st.Requests, time.Duration(st.DurationMS)*time.Millisecond, dur.Round(100*time.Millisecond),
		st.InputTokens/int64(st.Requests), st.OutputTokens/int64(st.Requests), st.DistinctBlocks, st.TotalBlocks, st.Reuse)
	fmt.Printf("simulators: -cache-blocks %d (block size %d; %.2f of the slice's distinct blocks over %d workers), -prefill-per-token %v; prefill utilisation at ideal reuse %.2f\n\n",
		capacity, o.blockSize, o.cacheShare, o.workers, o.prefillPerToken, offered)
	blocks := map[uint64][]uint32{}
	bodies := make([][]byte, len(part))
	at := make([]time.Duration, len(part))
	for i, r := range part {
		b, err := completionBody(promptTokens(r, blocks), r.OutputLength, o.maxOut)
		if err != nil {
			return err
		}
		bodies[i], at[i] = b, time.Duration(float64(r.Timestamp)/o.compress*float64(time.Millisecond))
	}
	clear(blocks)
	fmt.Println("| round | policy | hit rate | TTFT mean | p50 | p95 | p99 | requests per worker | errors | wall |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	rounds := make([]map[string]result, o.rounds)
	for ri := range rounds {
		rounds[ri] = map[string]result{}
		rat := jittered(at, o.jitter, ri)
		for _, pi := range roundOrder(len(pols), ri) {
			p := pols[pi]
			r, err := runPolicy(ctx, o, fe, p, fmt.Sprintf("t%d-r%d-p%d", si, ri, pi), capacity, bodies, rat, dur)
			if err != nil {
				return fmt.Errorf("slice %d:%d, round %d, policy %s: %w", sl.Start, sl.N, ri+1, p.Label, err)
			}
			rounds[ri][p.Label] = r
			ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
			errs := strconv.Itoa(r.Errors)
			if r.FirstErr != nil {
				errs += fmt.Sprintf(" (first: %v)", r.FirstErr)
			}
			fmt.Printf("| %d | %s | %.3f | %s | %s | %s | %s | %v | %s | %v |\n", ri+1, r.Label, r.HitRate, ms(r.TTFT.Mean), ms(r.TTFT.P50),
				ms(r.TTFT.P95), ms(r.TTFT.P99), r.PerWorker, errs, r.Wall.Round(100*time.Millisecond))
		}
	}
	fmt.Println()
	labels := make([]string, len(pols))
	for i, p := range pols {
		labels[i] = p.Label
	}
	if lines := ratioSummary(labels, rounds); len(lines) > 0 {
		fmt.Printf("Ratios over %d round(s): median [min–max] (per round, in order)\n\n", o.rounds)
		fmt.Println("| policy | TTFT mean ÷ linear | hit rate ÷ linear | TTFT mean ÷ round_robin | p95 ÷ round_robin |")
		fmt.Println("|---|---|---|---|---|")
		for _, l := range lines {
			fmt.Println(l)
		}
	}
	fmt.Println()
	return nil
}

func runPolicy(ctx context.Context, o options, fe *sim.Frontend, p policy, runID string, capacity int, bodies [][]byte, at []time.Duration, dur time.Duration) (result, error) {
	cl, err := simcluster.Start(ctx, simcluster.Config{Policy: p.Name, Scheduler: p.Scheduler, RunID: runID, Workers: o.workers,
		ModelDir: o.modelDir, Frontend: fe, BlockSize: o.blockSize, Capacity: capacity,
		Sim: sim.Config{Model: "kvroute-sim", PrefillDelay: o.prefillDelay, PrefillPerToken: o.prefillPerToken,
			TokenDelay: o.tokenDelay, MaxRunning: o.maxRunning, MaxTokens: o.maxOut}})
	if err != nil {
		return result{}, err
	}
	defer cl.Stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	start := time.Now()
	outs := replay(ctx, client, cl.Base, bodies, at, dur+o.drain)
	r := result{Label: p.Label, Wall: time.Since(start), PerWorker: make([]int, len(cl.IDs))}
	var ttfts []time.Duration
	for _, out := range outs {
		if out.Err != nil {
			if r.Errors++; r.FirstErr == nil {
				r.FirstErr = out.Err
			}
			continue
		}
		r.Prompt += int64(out.Prompt)
		r.Cache += int64(out.Cached)
		ttfts = append(ttfts, out.TTFT)
		if i := slices.Index(cl.IDs, out.Worker); i >= 0 {
			r.PerWorker[i]++
		}
	}
	if r.Errors == len(outs) {
		return r, fmt.Errorf("every request failed, first: %v", r.FirstErr)
	}
	if r.Prompt > 0 {
		r.HitRate = float64(r.Cache) / float64(r.Prompt)
	}
	r.TTFT = summarize(ttfts)
	return r, nil
}
