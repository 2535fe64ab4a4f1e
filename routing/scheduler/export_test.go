package scheduler

import "time"

// SetClock replaces the tracker's clock (the prefill progress's, progress.go) for tests.
func (t *Tracker) SetClock(now func() time.Time) { t.now = now }
