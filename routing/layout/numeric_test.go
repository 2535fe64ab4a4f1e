package layout_test

import (
	"math"
	"slices"
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
)

// floatText is a float and the text Python prints for it.
type floatText struct {
	x    float64
	want string
}

// checkFloatText checks format (named name) against Python's texts.
func checkFloatText(t *testing.T, name string, format func(float64) string, cases []floatText) {
	t.Helper()
	for _, c := range cases {
		if got := format(c.x); got != c.want {
			t.Errorf("%s(%v) = %q, want %q", name, c.x, got, c.want)
		}
	}
}

func TestTimestampTextMatchesPython(t *testing.T) {
	// Expected values printed by Python 3.11 f"<{x:.1f} seconds>".
	checkFloatText(t, "TimestampText", layout.TimestampText, []floatText{
		{0.25, "<0.2 seconds>"}, {0.15, "<0.1 seconds>"}, {4.65, "<4.7 seconds>"}, {0.35, "<0.3 seconds>"},
		{18.375, "<18.4 seconds>"}, {16.25, "<16.2 seconds>"}, {1.25, "<1.2 seconds>"}, {2.5, "<2.5 seconds>"},
		{0.05, "<0.1 seconds>"}, {123.45, "<123.5 seconds>"}, {0, "<0.0 seconds>"},
	})
}

func TestPyFloatRepr(t *testing.T) {
	// Expected values printed by Python 3.11 repr(float).
	checkFloatText(t, "PyFloatRepr", layout.PyFloatRepr, []floatText{
		{300, "300.0"}, {200.03125, "200.03125"}, {1e-05, "1e-05"}, {1e16, "1e+16"}, {0.0001, "0.0001"},
		{1.5e-7, "1.5e-07"}, {-2.5, "-2.5"}, {1e22, "1e+22"}, {12345678901234567.0, "1.2345678901234568e+16"},
		{1234567890123456.0, "1234567890123456.0"}, {0.1, "0.1"}, {201, "201.0"}, {200.5, "200.5"},
	})
}

func TestES6NumberRFC8785(t *testing.T) {
	// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical forms.
	cases := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"}, {0x8000000000000000, "0"}, {0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"}, {0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"}, {0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"}, {0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"}, {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"}, {0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"}, {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"}, {0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"}, {0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"}, {0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"}, {0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, c := range cases {
		got, err := layout.ES6Number(math.Float64frombits(c.bits))
		if err != nil || got != c.want {
			t.Errorf("ES6Number(%#x) = %q, %v; want %q", c.bits, got, err, c.want)
		}
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := layout.ES6Number(x); err == nil {
			t.Errorf("ES6Number(%v): no error", x)
		}
	}
}

func TestLinspaceNumpyArithmetic(t *testing.T) {
	// numpy 1.24: np.linspace(0, 9, 4) = [0, 3, 6, 9]; one value; zero step.
	if got := layout.Linspace(0, 9, 4); !slices.Equal(got, []float64{0, 3, 6, 9}) {
		t.Errorf("Linspace(0,9,4) = %v", got)
	}
	if got := layout.Linspace(0, 9, 1); !slices.Equal(got, []float64{0}) {
		t.Errorf("Linspace(0,9,1) = %v", got)
	}
	if got := layout.Linspace(0, 0, 3); !slices.Equal(got, []float64{0, 0, 0}) {
		t.Errorf("Linspace(0,0,3) = %v", got)
	}
	// Values are i*step + start with step = (stop-start)/(n-1), the last one pinned to stop.
	step := 299.0 / 19
	if got := layout.Linspace(0, 299, 20); got[3] != 3*step || got[19] != 299 {
		t.Errorf("Linspace(0,299,20) = %v", got)
	}
}

func TestSamplerEdges(t *testing.T) {
	// Dynamo's golden: 100 frames, max_frames 4 → [0, 33, 66, 99].
	if got, err := layout.SampleDynamo(100, 4); err != nil || !slices.Equal(got, []int{0, 33, 66, 99}) {
		t.Errorf("SampleDynamo(100,4) = %v, %v", got, err)
	}
	if got, err := layout.SampleUniform(5, -1); err != nil || !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("SampleUniform(5,-1) = %v, %v", got, err)
	}
	for _, f := range []func() error{
		func() error { _, err := layout.SampleHFFPS(0, 30, 2, 4, 768); return err },
		func() error { _, err := layout.SampleHFFPS(10, 0, 2, 4, 768); return err },
		func() error { _, err := layout.SampleHFFPS(10, math.NaN(), 2, 4, 768); return err },
		func() error { _, err := layout.SampleUniform(-3, 4); return err },
		func() error { _, err := layout.SampleDynamo(layout.MaxTotalFrames+1, 4); return err },
		func() error { _, err := layout.SampleUniform(layout.MaxSampledFrames+1, -1); return err },
	} {
		if err := f(); layout.StageOf(err) != layout.StageSampling {
			t.Errorf("err %v, want a sampling stage error", err)
		}
	}
	p := layout.SGLangPreprocess{ImageFactor: 28, VideoMinPixels: 100352, VideoMaxPixels: 602112,
		VideoTotalPixels: 90316800, FrameFactor: 2, FPS: 2, MinFrames: 4, MaxFrames: 768}
	if _, err := layout.SampleSGLang(1, 30, p); layout.StageOf(err) != layout.StageSGLangNFrames {
		t.Errorf("SampleSGLang(1 frame): err %v, want sglang_nframes", err)
	}
	// A floor branch without a guard can reach zero: a 1×200 frame far over budget.
	p.VideoMaxPixels, p.VideoMinPixels, p.VideoTotalPixels = 100, 10, 100
	if _, _, err := layout.SGLangPreResize(1, 200, 2, p); layout.StageOf(err) != layout.StageSGLangPreResize {
		t.Errorf("SGLangPreResize to zero: err %v, want sglang_pre_resize", err)
	}
}

func TestSmartResizeBounds(t *testing.T) {
	r := layout.Resize{Mode: layout.ResizeRoundTiesEven, MinPixels: 4096, MaxPixels: 25165824, PatchSize: 16, MergeSize: 2, TemporalPatchSize: 2}
	for _, c := range []struct{ n, h, w int }{{2, 0, 10}, {2, 10, -1}, {2, layout.MaxSide + 1, 100}, {0, 100, 100}, {layout.MaxSampledFrames + 1, 100, 100}} {
		if _, _, err := layout.SmartResizeVideo(c.n, c.h, c.w, r); layout.StageOf(err) != layout.StageSmartResize {
			t.Errorf("SmartResizeVideo(%v): err %v, want smart_resize", c, err)
		}
	}
	r.Mode = "floor"
	if _, _, err := layout.SmartResizeVideo(4, 360, 640, r); err == nil {
		t.Error("unknown mode: no error")
	}
	// Legacy vs new on Dynamo's probe: 5 frames of 3760×1120.
	r.Mode = layout.ResizeLegacyCeil
	if h, w, err := layout.SmartResizeVideo(5, 1120, 3760, r); err != nil || h != 1216 || w != 4096 {
		t.Errorf("legacy probe = %d×%d, %v; want 1216×4096", h, w, err)
	}
	r.Mode = layout.ResizeRoundTiesEven
	if h, w, err := layout.SmartResizeVideo(5, 1120, 3760, r); err != nil || h != 1120 || w != 3776 {
		t.Errorf("round_ties_even probe = %d×%d, %v; want 1120×3776", h, w, err)
	}
}
