package codec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// checkSameAsChecked decodes b with Decode (one pass first) and with the check-then-decode path: both
// fail, or both give the same Batch.
func checkSameAsChecked(t *testing.T, dc *Decoder, b []byte) {
	t.Helper()
	got, gerr := dc.Decode(VLLM, b)
	want, werr := NewDecoder().decodeEngineChecked(b)
	if (gerr != nil) != (werr != nil) {
		t.Fatalf("% x: one pass error %v, checked error %v", b, gerr, werr)
	}
	if gerr != nil {
		if !errors.Is(gerr, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", gerr)
		}
		return
	}
	if (got.FirstErr == nil) != (want.FirstErr == nil) {
		t.Fatalf("% x: first errors %v and %v", b, got.FirstErr, want.FirstErr)
	}
	got.FirstErr, want.FirstErr = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("% x:\none pass %+v\nchecked  %+v", b, got, want)
	}
}

// TestOnePassEqualsChecked: on golden batches, their truncations and random byte changes, the one-pass
// decode gives exactly what checking the whole batch first gives.
func TestOnePassEqualsChecked(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dc := NewDecoder()
	n := 0
	for _, r := range goldenEvents(t) {
		p := payload(t, r)
		checkSameAsChecked(t, dc, p)
		for cut := 0; cut < len(p); cut++ {
			checkSameAsChecked(t, dc, p[:cut])
		}
		for i := 0; i < 300; i++ {
			m := bytes.Clone(p)
			for k := rng.IntN(3) + 1; k > 0; k-- {
				m[rng.IntN(len(m))] = byte(rng.Uint32())
			}
			checkSameAsChecked(t, dc, m)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no golden batches")
	}
}

// nested returns d nested one-element arrays around 1.
func nested(d int) []byte {
	return append(bytes.Repeat([]byte{0x91}, d), 0x01)
}

// TestOnePassNestingBound: values skipped inside an event count their enclosing containers, so a
// batch nested MaxDepth deep decodes and one level more is an error, as when checked whole.
func TestOnePassNestingBound(t *testing.T) {
	head := []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91} // [ts, [event]]
	for _, tc := range []struct {
		name  string
		outer int // enclosing non-empty containers of the nested value
		build func(v []byte) []byte
	}{
		// ["BlockStored", [1], 1, [], 16, nil, nil, nil, nil, nil, v]: v is an 11th, unknown field.
		{"unknown field", inEvent, func(v []byte) []byte {
			ev := append([]byte{0x9b, 0xab}, "BlockStored"...)
			ev = append(ev, 0x91, 0x01, 0xc0, 0x90, 0x10, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0)
			return append(ev, v...)
		}},
		// extra_keys [[v]] with one block and no tokens: v is a KeyOther item.
		{"extra key", inKeyEntry, func(v []byte) []byte {
			ev := append([]byte{0x99, 0xab}, "BlockStored"...)
			ev = append(ev, 0x91, 0x01, 0xc0, 0x90, 0x10, 0xc0, 0xc0, 0xc0, 0x91, 0x91)
			return append(ev, v...)
		}},
	} {
		for _, d := range []int{MaxDepth - tc.outer - 1, MaxDepth - tc.outer, MaxDepth - tc.outer + 1} {
			b := append(bytes.Clone(head), tc.build(nested(d))...)
			_, err := Decode(VLLM, b)
			if ok := d <= MaxDepth-tc.outer; ok != (err == nil) {
				t.Errorf("%s nested %d: error %v", tc.name, d, err)
			}
			checkSameAsChecked(t, NewDecoder(), b)
		}
	}
}

// FuzzOnePassEqualsChecked: for any bytes, the one-pass decode and the check-then-decode path agree.
func FuzzOnePassEqualsChecked(f *testing.F) {
	for _, r := range goldenEvents(f) {
		f.Add(payload(f, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSameAsChecked(t, NewDecoder(), b) })
}
