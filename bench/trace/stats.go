package main

import (
	"math"
	"slices"
	"time"
)

// latency summarizes time-to-first-token samples.
type latency struct {
	Mean, P50, P95, P99 time.Duration
}

// summarize returns the mean and the nearest-rank 50th, 95th and 99th percentiles (zero for none).
func summarize(d []time.Duration) latency {
	if len(d) == 0 {
		return latency{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	return latency{Mean: sum / time.Duration(len(s)), P50: quantile(s, 0.50), P95: quantile(s, 0.95), P99: quantile(s, 0.99)}
}

// quantile is the nearest-rank q-quantile of sorted s: s[ceil(q·n) − 1].
func quantile(s []time.Duration, q float64) time.Duration {
	return s[min(len(s)-1, max(0, int(math.Ceil(q*float64(len(s))))-1))]
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}
