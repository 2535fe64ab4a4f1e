// Package scheduler picks the worker for a request (DESIGN.md §7): a cost per candidate worker from its
// KV overlap and active load — by default the ttft model (the time to first token the worker would
// give the request, in prefill tokens: uncached tokens plus the prefill queued ahead plus the wait for
// a running slot; see Config.Score and docs/architecture.md), or Dynamo's linear cost (cost linear;
// lib/kv-router selector/reference.rs; notes in reference/dynamo-notes.md §7) — busy thresholds,
// minimum with random tie-breaks or softmax sampling, and the router-local accounting of active
// prefill tokens, decode blocks and requests per worker that feeds the cost.
//
// A Scheduler and its Tracker are safe for concurrent use.
package scheduler
