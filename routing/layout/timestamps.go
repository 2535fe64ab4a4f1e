package layout

import (
	"strconv"
	"strings"
)

// GroupTimestamps computes the per-group timestamps exactly as Hugging Face Qwen3VLProcessor
// (_calculate_timestamps) does: pad the index list with its last element to a multiple of
// temporal, ts_i = idx_i/srcFPS (float64), group_g = (ts_{g·t} + ts_{g·t+t-1}) / 2. The operation
// order matters: another one changes the last bit and can flip a near-tie text. Seconds; one
// value per temporal group; nil for no indices.
func GroupTimestamps(indices []int, srcFPS float64, temporal int) []float64 {
	if len(indices) == 0 || temporal <= 0 {
		return nil
	}
	groups := (len(indices) + temporal - 1) / temporal
	last := indices[len(indices)-1]
	at := func(i int) float64 {
		if i < len(indices) {
			return float64(indices[i]) / srcFPS
		}
		return float64(last) / srcFPS
	}
	out := make([]float64, groups)
	for g := range out {
		out[g] = (at(g*temporal) + at(g*temporal+temporal-1)) / 2
	}
	return out
}

// TimestampText is Python's f"<{t:.1f} seconds>": the value correctly rounded to one decimal,
// ties to even on the exact binary value (0.25 → "<0.2 seconds>", 4.65 → "<4.7 seconds>").
// strconv.FormatFloat with 'f' and precision 1 rounds the same way.
func TimestampText(t float64) string {
	return "<" + strconv.FormatFloat(t, 'f', 1, 64) + " seconds>"
}

// PyFloatRepr formats x as Python's repr(float) does: the shortest digits that round-trip, fixed
// notation for decimal exponents in [-4, 16) with ".0" kept on integral values, otherwise
// scientific notation with a signed exponent of at least two digits ("1e-05", "1e+16").
func PyFloatRepr(x float64) string {
	switch {
	case x != x:
		return "nan"
	case x > 1.7976931348623157e308:
		return "inf"
	case x < -1.7976931348623157e308:
		return "-inf"
	}
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	neg := strings.HasPrefix(e, "-")
	if neg {
		e = e[1:]
	}
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	var s string
	if exp >= -4 && exp < 16 {
		if exp >= 0 {
			if len(digits) <= exp+1 {
				s = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				s = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			s = "0." + strings.Repeat("0", -exp-1) + digits
		}
	} else {
		s = digits[:1]
		if len(digits) > 1 {
			s += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		s += "e" + sign + es
	}
	if neg {
		s = "-" + s
	}
	return s
}
