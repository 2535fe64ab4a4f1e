package main

import (
	"math/rand/v2"
	"time"
)

// jittered returns the arrival times of one round: each of at moved by a uniform offset in
// [−j, +j] (never before 0), drawn from a generator seeded by the round, so every policy of a round
// sees the same arrivals and every round other ones. j = 0 returns at itself.
//
// Why: a replay is nearly deterministic for one binary (three runs of one build on 3300:150@1.3:
// 3043–3081 ms TTFT mean), while a few milliseconds of timing send the cluster down another path
// (the same code built again: one 600-request slice 25 % apart). Rounds on the recorded arrivals
// therefore repeat one trajectory; jittered rounds sample several (issue 26, eighth pass).
func jittered(at []time.Duration, j time.Duration, round int) []time.Duration {
	if j <= 0 {
		return at
	}
	rng := rand.New(rand.NewPCG(uint64(round)+1, 0x6b76726f757465)) // "kvroute"
	out := make([]time.Duration, len(at))
	for i, a := range at {
		out[i] = max(a+time.Duration((2*rng.Float64()-1)*float64(j)), 0)
	}
	return out
}
