package media_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kvroute/kvroute/media"
)

// TestConcurrentDecodes runs 32 decodes of different clips at once (run with -race): every one gives
// its golden identity, so no state leaks between decodes.
func TestConcurrentDecodes(t *testing.T) {
	g := loadGolden(t)
	type job struct {
		data    []byte
		sampler media.Sampler
		want    string
	}
	var jobs []job
	for _, v := range g.Videos {
		if v.Stream.DecodedFrames > 100 || v.Stream.DecodedFrames == 0 {
			continue // keep the race run short: small clips only
		}
		for _, vec := range v.Vectors {
			if vec.Identity == "" {
				continue
			}
			b, err := os.ReadFile(clipPath(v.File))
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, job{b, samplerFor(vec.Sampler), vec.Identity})
		}
	}
	d := newDecoder(t, &media.DecoderConfig{Slots: 8, SlotWait: 10 * time.Minute, DecodeTimeout: 10 * time.Minute, CacheEntries: 8})
	const n = 32
	errs := make([]string, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			j := jobs[i%len(jobs)]
			var r *media.Result
			var err error
			if i%2 == 0 {
				r, err = d.Decode(context.Background(), j.data, j.sampler, media.DecodeOptions{})
			} else {
				r, err = d.Identify(context.Background(), j.data, j.sampler, j.want) // a key per sampler
			}
			switch {
			case err != nil:
				errs[i] = err.Error()
			case r.IdentityHex() != j.want:
				errs[i] = "identity " + r.IdentityHex() + ", want " + j.want
			}
		}(i)
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Errorf("decode %d: %s", i, e)
		}
	}
}
