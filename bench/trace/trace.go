package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
)

// TraceBlock is the Mooncake trace's block size: one hash id stands for 512 prompt tokens
// (kvcache-ai/Mooncake, FAST25-release/traces; ../shared/traces/README.md).
const TraceBlock = 512

// vocabLimit is the first added (special) token id of the simulated model's tokenizer
// (testdata/golden/qwen3vl-test-model/tokenizer.json: added tokens 151643–151668); prompts draw
// from [0, vocabLimit), ordinary vocabulary ids only.
const vocabLimit = 151643

// record is one line of a Mooncake-format trace.
type record struct {
	// Timestamp is the arrival time in milliseconds from the trace's start.
	Timestamp int64 `json:"timestamp"`
	// InputLength and OutputLength are the prompt and completion lengths in tokens.
	InputLength  int `json:"input_length"`
	OutputLength int `json:"output_length"`
	// HashIDs holds one id per 512-token block of the prompt; equal ids are equal prefix blocks.
	HashIDs []uint64 `json:"hash_ids"`
}

// parseTrace reads a Mooncake-format trace (one JSON object per line; blank lines skipped) and
// checks each record: ids present, input_length within its blocks (the last block holds
// input_length − 512·(n−1) tokens, 1 to 512), timestamps not decreasing.
func parseTrace(r io.Reader) ([]record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []record
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		n := len(rec.HashIDs)
		switch {
		case n == 0:
			return nil, fmt.Errorf("trace line %d: no hash_ids", line)
		case rec.InputLength <= TraceBlock*(n-1) || rec.InputLength > TraceBlock*n:
			return nil, fmt.Errorf("trace line %d: input_length %d does not fit %d blocks of %d", line, rec.InputLength, n, TraceBlock)
		case rec.OutputLength < 0:
			return nil, fmt.Errorf("trace line %d: output_length %d", line, rec.OutputLength)
		case len(out) > 0 && rec.Timestamp < out[len(out)-1].Timestamp:
			return nil, fmt.Errorf("trace line %d: timestamp %d before the previous %d", line, rec.Timestamp, out[len(out)-1].Timestamp)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	return out, nil
}

// sliceTrace returns records [start, start+n) (clamped), timestamps shifted so the first is 0.
func sliceTrace(recs []record, start, n int) []record {
	start = min(max(start, 0), len(recs))
	end := min(start+max(n, 0), len(recs))
	out := slices.Clone(recs[start:end])
	if len(out) > 0 {
		t0 := out[0].Timestamp
		for i := range out {
			out[i].Timestamp -= t0
		}
	}
	return out
}

// blockTokens returns the 512 token ids hash id h stands for: a PCG stream seeded by h, drawn
// uniformly from the ordinary vocabulary [0, vocabLimit). The same id gives the same tokens in every
// request and every run, so equal hash-id prefixes are equal token prefixes.
func blockTokens(h uint64) []uint32 {
	rng := rand.New(rand.NewPCG(h, 0x6b76726f75746521)) // "kvroute!"
	out := make([]uint32, TraceBlock)
	for i := range out {
		out[i] = uint32(rng.IntN(vocabLimit))
	}
	return out
}

// promptTokens builds the record's token-id prompt: each hash id's block, the last one cut to
// input_length − 512·(n−1) tokens. cache memoizes blocks by id (nil: none).
func promptTokens(rec record, cache map[uint64][]uint32) []uint32 {
	out := make([]uint32, 0, rec.InputLength)
	for _, h := range rec.HashIDs {
		b, ok := cache[h]
		if !ok {
			b = blockTokens(h)
			if cache != nil {
				cache[h] = b
			}
		}
		out = append(out, b[:min(TraceBlock, rec.InputLength-len(out))]...)
	}
	return out
}

// sliceStats are the statistics the simulator settings come from.
type sliceStats struct {
	Requests int
	// DistinctBlocks counts distinct hash ids; TotalBlocks all of them; Reuse is the ideal prefix
	// reuse with an unbounded cache: the share of blocks whose id appeared before (as a prefix).
	DistinctBlocks, TotalBlocks int
	Reuse                       float64
	// InputTokens and OutputTokens are summed over the slice; Duration is the last arrival (ms).
	InputTokens, OutputTokens int64
	DurationMS                int64
}

// statsOf computes a slice's statistics. Reuse counts a block as reusable when a previous request
// had the same hash id at the same position behind the same prefix — for Mooncake ids, which encode
// their prefix, the same as the id having been seen before.
func statsOf(recs []record) sliceStats {
	s := sliceStats{Requests: len(recs)}
	seen := map[uint64]bool{}
	reused := 0
	for _, r := range recs {
		s.TotalBlocks += len(r.HashIDs)
		s.InputTokens += int64(r.InputLength)
		s.OutputTokens += int64(r.OutputLength)
		for _, h := range r.HashIDs {
			if seen[h] {
				reused++
			}
			seen[h] = true
		}
	}
	s.DistinctBlocks = len(seen)
	if s.TotalBlocks > 0 {
		s.Reuse = float64(reused) / float64(s.TotalBlocks)
	}
	if len(recs) > 0 {
		s.DurationMS = recs[len(recs)-1].Timestamp - recs[0].Timestamp
	}
	return s
}
