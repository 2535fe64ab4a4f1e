package defaults

import (
	"testing"
	"time"
)

func TestPositiveAndOverride(t *testing.T) {
	for _, tc := range []struct{ field, other, positive, override int }{
		{0, 7, 7, 7},  // unset field: Positive fills the default; Override takes a set value
		{3, 7, 3, 7},  // set field: Positive keeps it; Override replaces it
		{-1, 7, 7, 7}, // a negative field means unset to Positive
		{3, 0, 3, 3},  // Override with an unset value keeps the field
		{3, -2, 3, 3}, // and with a negative one
	} {
		p, o := tc.field, tc.field
		Positive(&p, tc.other)
		Override(&o, tc.other)
		if p != tc.positive || o != tc.override {
			t.Errorf("field %d, value %d: Positive %d (want %d), Override %d (want %d)", tc.field, tc.other, p, tc.positive, o, tc.override)
		}
	}
	d := 5 * time.Second
	Override(&d, 0)
	Override(&d, time.Second)
	if d != time.Second {
		t.Errorf("durations: %s", d)
	}
}
