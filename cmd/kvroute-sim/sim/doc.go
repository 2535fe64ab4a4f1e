// Package sim re-exports kvroute-sim's worker, which lives in internal/sim so that tests anywhere in
// the module can run simulators in-process. New code should import internal/sim directly.
package sim
