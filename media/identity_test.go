package media_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/kvroute/kvroute/kv"

	"github.com/zeebo/xxh3"

	"github.com/kvroute/kvroute/media"
	"github.com/kvroute/kvroute/reason"
)

func TestPyFloat(t *testing.T) {
	cases := []struct {
		v    float64
		want string
	}{
		{30.0, "30.0"}, {0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1.266, "1.266"},
		{1.0 / 30, "0.03333333333333333"}, {0.1, "0.1"}, {1e-05, "1e-05"}, {0.0001, "0.0001"},
		{1e16, "1e+16"}, {9999999999999998.0, "9999999999999998.0"}, {1.5e300, "1.5e+300"},
		{123456789.125, "123456789.125"}, {-2.5, "-2.5"}, {5e-324, "5e-324"}, {29.97002997002997, "29.97002997002997"},
	}
	for _, c := range cases {
		got, err := media.PyFloat(c.v)
		if err != nil || got != c.want {
			t.Errorf("PyFloat(%v) = %q, %v; want %q", c.v, got, err, c.want)
		}
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := media.PyFloat(v); err == nil {
			t.Errorf("PyFloat(%v): no error", v)
		}
	}
}

func TestMetadataJSON(t *testing.T) {
	m := media.Metadata{SourceFPS: 4, SourceDuration: 2.5, SourceTotalFrames: 10, FramesIndices: []int{0, 2, 4, 7, 9}}
	j, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	// golden video_identity.json, field/qBi_base.webm hf_fps.
	want := `{"source_fps":4.0,"source_duration":2.5,"sampled_timestamps":[0.0,0.5,1.0,1.75,2.25],"source_total_frames":10,"frames_indices":[0,2,4,7,9]}`
	if string(j) != want {
		t.Fatalf("J %s\nwant %s", j, want)
	}
	if _, err := (media.Metadata{SourceFPS: 0, FramesIndices: []int{1}}).JSON(); reason.CodeOf(err) != reason.IdentityError {
		t.Fatalf("fps 0: err %v, want identity_error", err)
	}
}

// TestIdentityLayout recomputes the identity with a one-shot XXH3 over the byte layout of DESIGN §3.
func TestIdentityLayout(t *testing.T) {
	j := []byte(`{"x":1}`)
	frames := [][]byte{{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}
	got, err := media.Identity(j, 2, 1, 2, frames)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	u := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	u(5)
	b = append(b, "video"...)
	u(4)
	u(2)
	u(1)
	u(2)
	u(3)
	b = append(b, 0)
	u(uint64(len(j)))
	b = append(b, j...)
	u(12)
	b = append(b, frames[0]...)
	b = append(b, frames[1]...)
	if want := kv.Identity(xxh3.Hash(b)); got != want {
		t.Fatalf("identity %016x, one-shot %016x", got, want)
	}
	// One changed byte, index or shape changes it.
	frames[1][5]++
	if g2, _ := media.Identity(j, 2, 1, 2, frames); g2 == got {
		t.Fatal("pixel change kept the identity")
	}
	if g3, _ := media.Identity(j, 1, 2, 2, [][]byte{append(frames[0], frames[1]...)}); g3 == got {
		t.Fatal("shape change kept the identity")
	}
	for _, bad := range []func() (kv.Identity, error){
		func() (kv.Identity, error) { return media.Identity(j, 0, 1, 2, nil) },
		func() (kv.Identity, error) { return media.Identity(j, 2, 1, 2, frames[:1]) },
		func() (kv.Identity, error) { return media.Identity(j, 1, 1, 2, [][]byte{{1}}) },
	} {
		if _, err := bad(); reason.CodeOf(err) != reason.IdentityError {
			t.Errorf("bad shape: err %v, want identity_error", err)
		}
	}
}

func TestIdentityHex(t *testing.T) {
	if s := media.FormatIdentity(0xab); s != "00000000000000ab" {
		t.Fatal(s)
	}
	v, err := media.ParseIdentity("0a555750849fa9f6")
	if err != nil || v != 0x0a555750849fa9f6 {
		t.Fatal(v, err)
	}
	for _, s := range []string{"", "0a555750849fa9f", "0a555750849fa9fz"} {
		if _, err := media.ParseIdentity(s); err == nil {
			t.Errorf("ParseIdentity(%q): no error", s)
		}
	}
}
