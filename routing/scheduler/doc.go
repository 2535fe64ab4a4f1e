// Package scheduler picks the worker for a request (DESIGN.md §7): Dynamo's linear cost over KV overlap
// and active load (lib/kv-router selector/reference.rs; notes in reference/dynamo-notes.md §7), busy
// thresholds, minimum with random tie-breaks or softmax sampling, and the router-local accounting of
// active prefill tokens and decode blocks per worker that feeds the cost.
//
// A Scheduler and its Tracker are safe for concurrent use.
package scheduler
