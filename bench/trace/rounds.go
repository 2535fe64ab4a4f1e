package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// roundOrder is the order in which the policies run in round r (0-based): as given in even
// rounds, reversed in odd ones (ABC CBA ABC …). On a machine whose background load drifts, each
// policy then runs as often early as late in a pair of rounds, so a drift does not favour the
// policy that always runs first.
func roundOrder(n, r int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	if r%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// spread is the median and range of one ratio over the rounds.
type spread struct {
	Median, Min, Max float64
	Rounds           []float64
}

// spreadOf returns the median (mean of the two middle values for an even count), minimum and
// maximum of v, NaN values left out; zero for none.
func spreadOf(v []float64) spread {
	s := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return spread{}
	}
	out := spread{Rounds: slices.Clone(s)}
	slices.Sort(s)
	out.Min, out.Max = s[0], s[len(s)-1]
	if n := len(s); n%2 == 1 {
		out.Median = s[n/2]
	} else {
		out.Median = (s[n/2-1] + s[n/2]) / 2
	}
	return out
}

func (s spread) String() string {
	if len(s.Rounds) == 0 {
		return "–"
	}
	parts := make([]string, len(s.Rounds))
	for i, v := range s.Rounds {
		parts[i] = fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.2f [%.2f–%.2f] (%s)", s.Median, s.Min, s.Max, strings.Join(parts, ", "))
}

// ratioSummary prints, per kvroute policy other than linear, the per-round ratios to linear (TTFT
// mean, hit rate) and to round robin (TTFT mean, p95) as median [min–max] (rounds in order).
// rounds[r] maps a policy label to its result in round r.
func ratioSummary(labels []string, rounds []map[string]result) []string {
	const lin, rr = "kvroute[cost linear]", "round_robin"
	var lines []string
	for _, l := range labels {
		if !strings.HasPrefix(l, "kvroute") || l == lin {
			continue
		}
		var mLin, hLin, mRR, p95RR []float64
		for _, byName := range rounds {
			r, ok := byName[l]
			if !ok {
				continue
			}
			if b, ok := byName[lin]; ok {
				mLin = append(mLin, ratio(r.TTFT.Mean, b.TTFT.Mean))
				hLin = append(hLin, r.HitRate/b.HitRate)
			}
			if b, ok := byName[rr]; ok {
				mRR = append(mRR, ratio(r.TTFT.Mean, b.TTFT.Mean))
				p95RR = append(p95RR, ratio(r.TTFT.P95, b.TTFT.P95))
			}
		}
		lines = append(lines, fmt.Sprintf("| %s | %v | %v | %v | %v |", l, spreadOf(mLin), spreadOf(hLin), spreadOf(mRR), spreadOf(p95RR)))
	}
	return lines
}
