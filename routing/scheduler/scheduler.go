package scheduler

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/kvroute/kvroute/kv/index"
)

// ErrNoCandidates is returned by Select when no candidate is available; the caller falls back to its
// fallback policy.
var ErrNoCandidates = errors.New("no available candidate")

// Config holds the scheduler's parameters. Use DefaultConfig for the defaults: zero is a legal value for
// every numeric field (prefill_load_scale 0 routes on decode load alone, overlap_credit 0 ignores the
// cache, max_running 0 turns the queue term off).
type Config struct {
	// CostModel is the cost model: CostTTFT2 ("ttft2", the default since issue 26, also meant by
	// ""; docs/architecture.md, "Cost model"), CostTTFT ("ttft", the default before it) or
	// CostLinear ("linear", DESIGN.md §7). See Score.
	CostModel string `json:"cost,omitempty"`
	// MaxRunning is the workers' running-sequence limit (vLLM max_num_seqs, SGLang
	// max_running_requests) as the ttft model assumes it; a request routed to a worker with this
	// many active requests waits for a slot. Default: 0 (no queue term).
	MaxRunning int64 `json:"max_running,omitempty"`
	// QueueWaitTokens is what one sequence over MaxRunning costs in the ttft model, in prefill
	// tokens: the wait for a running sequence to finish, as prefill work. 0 means the default,
	// DefaultQueueWaitTokens (1024); max_running 0 is how the term is turned off.
	QueueWaitTokens float64 `json:"queue_wait_tokens,omitempty"`
	// BalanceFactor is the load bound's factor (consistent hashing with bounded loads): a worker
	// over the bound is skipped unless every available worker is. ttft2 bounds the requests in
	// flight now: over when in_flight + 1 > ceil(BalanceFactor · (in flight on the available
	// workers + 1) / available workers). ttft bounds each worker's share of the last
	// BalanceWindow routed requests: a worker with requests in flight whose count + 1 exceeds
	// ceil(BalanceFactor · (total + 1) / available workers). 0 means the default:
	// DefaultInFlightFactor (1.5) for ttft2, DefaultBalanceFactor (1.1) for ttft; a negative value turns the bound
	// off; otherwise it must be >= 1.
	BalanceFactor float64 `json:"balance_factor,omitempty"`
	// BalanceWindow is the number of recent requests per available worker the recent counts
	// cover (an exponential decay of 1 − 1/(BalanceWindow · workers) per routed request): ttft's
	// bound, and ttft2's tie-break among equal costs. 0 means the default, DefaultBalanceWindow (25).
	BalanceWindow int `json:"balance_window,omitempty"`
	// PrefillLoadScale weights the linear model's prefill term. Default: 1.
	PrefillLoadScale float64 `json:"prefill_load_scale"`
	// OverlapCredit is the linear model's prefill blocks credited per overlapping cached block.
	// Default: 1.
	OverlapCredit float64 `json:"overlap_credit"`
	// Temperature 0 picks the minimum cost; above 0 it samples a softmax of the normalized costs.
	// Default: 0.
	Temperature float64 `json:"temperature"`
	// MaxActivePrefillTokens marks a worker busy when its active prefill tokens exceed it; busy workers
	// are skipped unless every available worker is busy. Default: 0 (off).
	MaxActivePrefillTokens int64 `json:"max_active_prefill_tokens"`
	// MaxActiveDecodeBlocks marks a worker busy when its active decode blocks exceed it. Default: 0 (off).
	MaxActiveDecodeBlocks int64 `json:"max_active_decode_blocks"`
	// AffinityOff turns the affinity credit for media the router did not decode off (Request.Affinity
	// is ignored; Caddyfile `affinity off`): such a request is routed on its text prefix alone, as
	// before issue 29. For comparisons (bench/quality's h264 workload) and for workers that do not
	// cache media. Default: false (affinity on).
	AffinityOff bool `json:"affinity_off,omitempty"`
}

// DefaultQueueWaitTokens is the default QueueWaitTokens.
const DefaultQueueWaitTokens = 1024

// DefaultConfig returns the defaults: cost ttft2 (CostModel ""), no max_running, queue_wait_tokens
// 1024 (QueueWaitTokens 0), prefill_load_scale 1 and overlap_credit 1 (for cost linear),
// temperature 0, no busy thresholds.
func DefaultConfig() *Config {
	return &Config{PrefillLoadScale: 1, OverlapCredit: 1}
}

// Model returns the effective cost model name: CostTTFT2 (also for ""), CostTTFT or CostLinear.
func (c *Config) Model() string {
	switch c.CostModel {
	case CostLinear, CostTTFT:
		return c.CostModel
	}
	return CostTTFT2
}

// Validate rejects negative or non-finite parameters.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"prefill_load_scale", c.PrefillLoadScale}, {"overlap_credit", c.OverlapCredit}, {"temperature", c.Temperature}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return fmt.Errorf("%s must be a finite number >= 0, got %v", f.name, f.v)
		}
	}
	if c.MaxActivePrefillTokens < 0 || c.MaxActiveDecodeBlocks < 0 {
		return errors.New("busy thresholds must be >= 0")
	}
	return c.validateModel()
}

// Candidate is one worker the request may go to: the scoring input, keyed by the index's worker
// key. It is not router.Candidate, the routing outcome that logs, explain and the selection policy
// read: that one is built from Scored (the input plus load, cost and terms), and this package sits
// below the router, so the outcome type cannot live here without pulling its JSON shape into the
// cost model.
type Candidate struct {
	Worker   index.WorkerKey
	Endpoint string
	// Available is false when the upstream is down (Caddy health); such a candidate is scored and
	// listed but never chosen.
	Available bool
	// OverlapBlocks is the worker's cached prefix of the request, in blocks (index.Match; ttft2:
	// at least PendingBlocks).
	OverlapBlocks int
	// PendingBlocks is the prefix, in blocks, that requests in flight on the worker share with
	// this one (Scheduler.PendingBlocks; ttft2, 0 otherwise): cached there by the time this
	// request's prefill starts, although the index does not show it yet.
	PendingBlocks int
	// PendingRequests is how many requests in flight on the worker share all PendingBlocks with
	// this one (Scheduler.Pending; ttft2): the herd the request would join there (balance.go).
	PendingRequests int
	// Ages is the age profile of the worker's cached prefix and CacheBlocks its learned eviction
	// age in blocks, 0 while unknown (index.MatchAges; ttft2): how much of the prefix survives
	// the prefill queued ahead of this request.
	Ages        []index.AgeStep
	CacheBlocks float64
}

// Request is what the cost needs to know about the request.
type Request struct {
	// Tokens is request_tokens: the prompt tokens the worker will see.
	Tokens int
	// BlockSize is the model's KV block size in tokens (> 0).
	BlockSize int
	// Affinity, when set, credits the rendezvous worker of media the router did not decode
	// (affinity.go).
	Affinity *Affinity
	// PrefixKeys are the request's PrefixKeys (ttft2): Begin holds them as the chosen worker's
	// pending prefix until the request is done.
	PrefixKeys []uint64
}

// Scored is one candidate with its load and cost, as listed by explain.
type Scored struct {
	Candidate
	Load Load
	// Cost is the candidate's cost under the configured model (computed for every candidate,
	// available or not); Terms its parts.
	Cost  float64
	Terms Terms
	// Busy is set when a busy threshold is exceeded; OverBalance when the load bound is (ttft:
	// RecentRequests + 1 > the bound; ttft2: active requests + 1 > Terms.InFlightBound and the
	// request rides there, a pending prefix beyond Terms.HerdBound or its affinity, balance.go);
	// Eligible when the candidate took part in the choice (available, and neither busy nor over
	// the bound unless all available candidates were).
	Busy, OverBalance, Eligible bool
	// RecentRequests is the worker's decayed count of recently routed requests (ttft, ttft2).
	RecentRequests float64
	// overInFlight is set when the worker's requests in flight, this one included, exceed
	// Terms.InFlightBound (ttft2); OverBalance only when the request would also ride there
	// (balance.go).
	overInFlight bool
	// expectedCached is the part of the prompt ttft2 expects cached when the prefill starts:
	// CreditedTokens before the cold rule zeroes it for the comparison (applyTTFT2).
	expectedCached float64
}

// Decision is the outcome of Select.
type Decision struct {
	Worker        index.WorkerKey
	Endpoint      string
	Cost          float64
	OverlapBlocks int
	// TotalBlocks is the request's complete blocks: floor(Tokens / BlockSize).
	TotalBlocks int
	// PrefillTokens is the chosen worker's uncached prompt tokens (PrefillOn); DecodeBlocks is
	// ceil(Tokens / BlockSize). Begin accounts both.
	PrefillTokens, DecodeBlocks int64
	// Costs and Overlaps hold every candidate's cost and overlap.
	Costs    map[index.WorkerKey]float64
	Overlaps map[index.WorkerKey]int
	// Tied lists the eligible candidates sharing the minimum cost, in candidate order.
	Tied []index.WorkerKey
	// Candidates lists every candidate in the order given.
	Candidates []Scored
	// AffinityWorker is the candidate credited with the request's Affinity (zero without one).
	AffinityWorker index.WorkerKey

	// tokens and blockSize are the request's, model the cost model, for PrefillOn.
	tokens, blockSize int64
	model             string
	// keys are the request's prefix keys, held as pending on the worker by Begin (ttft2).
	keys []uint64
}

// Scheduler scores candidates and tracks active load. Create it with New.
type Scheduler struct {
	cfg     Config
	tracker *Tracker
	// recent counts routed requests per worker: ttft's load bound, ttft2's tie-break.
	recent *recentLoad

	// rngMu protects rng, which math/rand/v2 does not make safe for concurrent use.
	rngMu sync.Mutex
	rng   *rand.Rand
}

// New returns a scheduler. A nil cfg means DefaultConfig(); a nil src means the runtime's random source
// (tests pass a seeded one, e.g. rand.NewPCG(1, 2)).
func New(cfg *Config, src rand.Source) (*Scheduler, error) {
	c := *DefaultConfig()
	if cfg != nil {
		c = *cfg
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("creating scheduler: %w", err)
	}
	s := &Scheduler{cfg: c, tracker: NewTracker(), recent: newRecentLoad(c.balanceWindow())}
	if src != nil {
		s.rng = rand.New(src)
	}
	return s, nil
}

// NewWithTracker is New over an existing tracker, so the active load outlives the scheduler
// (kvroute keeps one tracker across config reloads, whose cost parameters may change).
func NewWithTracker(cfg *Config, src rand.Source, t *Tracker) (*Scheduler, error) {
	if t == nil {
		return nil, errors.New("creating scheduler: nil tracker")
	}
	s, err := New(cfg, src)
	if err != nil {
		return nil, err
	}
	s.tracker = t
	return s, nil
}

// Tracker returns the scheduler's load tracker.
func (s *Scheduler) Tracker() *Tracker { return s.tracker }

// Config returns the scheduler's parameters.
func (s *Scheduler) Config() Config { return s.cfg }

func (c *Config) busy(l Load) bool {
	return (c.MaxActivePrefillTokens > 0 && l.PrefillTokens > c.MaxActivePrefillTokens) ||
		(c.MaxActiveDecodeBlocks > 0 && l.DecodeBlocks > c.MaxActiveDecodeBlocks)
}

// Select scores every candidate with its current load and picks one (DESIGN.md §7). Unavailable
// candidates are listed but never picked; busy ones are skipped unless every available one is busy.
// Temperature 0 picks the minimum cost, ties broken uniformly at random (ttft2: among the tied
// candidates with the fewest recently routed requests); above 0 it samples
// p ∝ exp(−(cost − min)/((max − min)·T)), uniform when max = min (Dynamo selector/reference.rs).
// It returns ErrNoCandidates when none is available, and an error for a block size below 1.
func (s *Scheduler) Select(req Request, cands []Candidate) (Decision, error) {
	if req.BlockSize < 1 {
		return Decision{}, fmt.Errorf("selecting worker: block size %d", req.BlockSize)
	}
	tokens := max(req.Tokens, 0)
	d := Decision{
		TotalBlocks:  tokens / req.BlockSize,
		DecodeBlocks: int64((tokens + req.BlockSize - 1) / req.BlockSize),
		Costs:        make(map[index.WorkerKey]float64, len(cands)),
		Overlaps:     make(map[index.WorkerKey]int, len(cands)),
		Candidates:   make([]Scored, len(cands)),
	}
	available, idle := 0, 0
	for i, c := range cands {
		sc := Scored{Candidate: c, Load: s.tracker.Load(c.Worker)}
		sc.Cost, sc.Terms = s.cfg.Score(sc.Load, tokens, req.BlockSize, c.OverlapBlocks)
		sc.Terms.PendingBlocks = c.PendingBlocks
		sc.Terms.PendingRequests = c.PendingRequests
		if s.cfg.Model() == CostTTFT2 {
			sc.Terms.PrefillDoneTokens, sc.Terms.OverrunTokens = s.tracker.PrefillDone(c.Worker)
		}
		if s.cfg.Model() == CostTTFT2 && s.cfg.MaxRunning == 0 {
			sc.Terms.applyLearnedLimit(s.tracker.LearnedMaxRunning(c.Worker), sc.Load, s.cfg.QueueWaitTokens)
		}
		sc.Busy = s.cfg.busy(sc.Load)
		if c.Available {
			available++
		}
		d.Costs[c.Worker] = sc.Cost
		d.Overlaps[c.Worker] = c.OverlapBlocks
		d.Candidates[i] = sc
	}
	if s.cfg.Model() == CostTTFT2 {
		applyTTFT2(d.Candidates, d.Costs, tokens, req.BlockSize)
	}
	s.markOverBalance(d.Candidates, cands, available)
	if s.cfg.AffinityOff {
		req.Affinity = nil
	}
	if i := s.applyAffinity(req.Affinity, req.BlockSize, d.Candidates); i >= 0 {
		d.AffinityWorker = d.Candidates[i].Worker
		d.Costs[d.AffinityWorker] = d.Candidates[i].Cost
	}
	for _, sc := range d.Candidates {
		if sc.Available && !sc.Busy && !sc.OverBalance {
			idle++
		}
	}
	if available == 0 {
		return d, fmt.Errorf("selecting worker among %d candidates: %w", len(cands), ErrNoCandidates)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	var elig []int
	for i := range d.Candidates {
		sc := &d.Candidates[i]
		sc.Eligible = sc.Available && (!(sc.Busy || sc.OverBalance) || idle == 0)
		if sc.Eligible {
			elig = append(elig, i)
			lo, hi = math.Min(lo, sc.Cost), math.Max(hi, sc.Cost)
		}
	}
	for _, i := range elig {
		if d.Candidates[i].Cost == lo {
			d.Tied = append(d.Tied, d.Candidates[i].Worker)
		}
	}
	var pick int
	if s.cfg.Temperature == 0 || hi == lo {
		// Minimum with a uniform tie-break (when hi == lo every eligible candidate is tied, which is
		// the uniform case of the softmax).
		var tied []int
		for _, i := range elig {
			if d.Candidates[i].Cost == lo {
				tied = append(tied, i)
			}
		}
		if s.cfg.Model() == CostTTFT2 {
			tied = fewestRecent(tied, d.Candidates)
		}
		pick = tied[s.intN(len(tied))]
	} else {
		pick = s.sample(elig, d.Candidates, lo, hi)
	}
	ch := &d.Candidates[pick]
	d.Worker, d.Endpoint, d.Cost, d.OverlapBlocks = ch.Worker, ch.Endpoint, ch.Cost, ch.OverlapBlocks
	d.tokens, d.blockSize, d.model = int64(tokens), int64(req.BlockSize), s.cfg.Model()
	d.PrefillTokens = d.prefillOn(ch)
	if s.cfg.Model() == CostTTFT2 {
		d.keys = req.PrefixKeys
	}
	return d, nil
}

// PrefillOn returns the uncached prompt tokens of the decision's request on worker w, the prefill
// the tracker accounts there until the first byte: max(Tokens − overlap(w)·BlockSize, 0), and under
// ttft2 the tokens the model does not expect cached when the prefill starts, Tokens −
// credited_tokens (a cached prefix the queue ahead evicts is prefilled again; the cold rule does not
// change what is cached). The whole prompt when w was not a candidate.
//
// The accounting follows the model's own prediction because an under-count compounds: a worker
// whose queue looks shorter than it is draws the next requests, each adding to the error, while an
// over-count sends them elsewhere and ends at the first byte (issue 26, eighth pass).
func (d Decision) PrefillOn(w index.WorkerKey) int64 {
	for i := range d.Candidates {
		if d.Candidates[i].Worker == w {
			return d.prefillOn(&d.Candidates[i])
		}
	}
	return d.tokens
}

func (d Decision) prefillOn(sc *Scored) int64 {
	if d.model == CostTTFT2 {
		return max(d.tokens-int64(sc.expectedCached), 0)
	}
	return max(d.tokens-int64(sc.OverlapBlocks)*d.blockSize, 0)
}

// sample draws from p_i ∝ exp(−(cost_i − lo)/((hi − lo)·T)) over the eligible candidates: a uniform u
// times the total weight, then the first candidate whose cumulative weight exceeds it.
func (s *Scheduler) sample(elig []int, sc []Scored, lo, hi float64) int {
	w := make([]float64, len(elig))
	total := 0.0
	for k, i := range elig {
		w[k] = math.Exp(-(sc[i].Cost - lo) / ((hi - lo) * s.cfg.Temperature))
		total += w[k]
	}
	u := s.float64() * total
	acc := 0.0
	last := elig[0]
	for k, i := range elig {
		if w[k] == 0 {
			continue
		}
		acc += w[k]
		last = i
		if acc > u {
			return i
		}
	}
	return last // rounding: u within the last ulp of total
}

func (s *Scheduler) intN(n int) int {
	if n == 1 {
		return 0
	}
	if s.rng == nil {
		return rand.IntN(n)
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(n)
}

func (s *Scheduler) float64() float64 {
	if s.rng == nil {
		return rand.Float64()
	}
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64()
}

// Begin accounts the decision's request on its worker: PrefillTokens until FirstByte, DecodeBlocks
// until Done, one routed request in the load bound's recent counts, and (ttft2) its prefix keys
// as the worker's pending prefix until Done.
func (s *Scheduler) Begin(d Decision) *Handle {
	avail := 0
	for _, c := range d.Candidates {
		if c.Available {
			avail++
		}
	}
	s.recent.add(d.Worker, avail)
	return s.tracker.beginPending(d.Worker, d.PrefillTokens, d.tokens, d.DecodeBlocks, d.keys)
}

// markOverBalance sets RecentRequests and OverBalance on the available candidates (ttft model with
// the bound on): over the bound when the worker has requests in flight and RecentRequests + 1 >
// ceil(factor · (total + 1) / available), total summed over the available candidates.
func (s *Scheduler) markOverBalance(scored []Scored, cands []Candidate, available int) {
	factor := s.cfg.balanceFactor()
	if s.cfg.Model() == CostLinear || available == 0 {
		return
	}
	if s.cfg.Model() == CostTTFT2 {
		s.markOverInFlight(scored, cands, factor, available)
		return
	}
	if factor == 0 {
		return
	}
	counts := s.recent.snapshot(cands)
	total := 0.0
	for i, c := range cands {
		scored[i].RecentRequests = counts[i]
		if c.Available {
			total += counts[i]
		}
	}
	bound := balanceBound(factor, total, available)
	for i := range scored {
		// A worker with nothing in flight is never over the bound: the bound spreads load, and an
		// idle worker has none to spread (sequential repeats keep going to the cached worker).
		scored[i].OverBalance = scored[i].Available && scored[i].Load.Requests > 0 && scored[i].RecentRequests+1 > bound
	}
}
