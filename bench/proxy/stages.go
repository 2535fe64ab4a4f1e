package main

import (
	"bufio"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// stageTotals are the sums and counts of caddy_kvroute_routing_seconds by stage, as Caddy's admin
// /metrics reports them at one moment.
type stageTotals map[string][2]float64 // stage -> {sum seconds, count}

// readStages scrapes the admin endpoint's /metrics for the routing_seconds histogram.
func readStages(admin string) (stageTotals, error) {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := stageTotals{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var field int
		switch {
		case strings.HasPrefix(line, "caddy_kvroute_routing_seconds_sum{"):
			field = 0
		case strings.HasPrefix(line, "caddy_kvroute_routing_seconds_count{"):
			field = 1
		default:
			continue
		}
		i := strings.Index(line, `stage="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			continue
		}
		stage := line[i+len(`stage="`):]
		stage = stage[:strings.IndexByte(stage, '"')]
		v, err := strconv.ParseFloat(line[j+1:], 64)
		if err != nil {
			continue
		}
		t := out[stage]
		t[field] = v
		out[stage] = t
	}
	return out, sc.Err()
}

// printStageMeans prints the mean time per request of each stage between two scrapes.
func printStageMeans(before, after stageTotals) {
	names := make([]string, 0, len(after))
	for s := range after {
		names = append(names, s)
	}
	sort.Strings(names)
	var parts []string
	for _, s := range names {
		n := after[s][1] - before[s][1]
		if n <= 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0fµs", s, (after[s][0]-before[s][0])/n*1e6))
	}
	fmt.Printf("%-14s      stages (kvroute, mean): %s\n", "", strings.Join(parts, ", "))
}
