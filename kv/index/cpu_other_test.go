//go:build !unix

package index_test

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
