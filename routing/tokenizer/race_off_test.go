//go:build !race

package tokenizer

// raceEnabled reports whether the test binary runs under the race detector.
const raceEnabled = false
