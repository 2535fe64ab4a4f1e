// Package router is kvroute's Caddy-free decision core: it takes one OpenAI request body and the
// current worker list and returns where the request should go and why (DESIGN.md §1 steps 1–6).
//
// It ties the other routing packages together: chat (parse, template), model (tokens), layout
// (contracts, Qwen3-VL expansion), blocks (LocalBlockHash), index (overlap) and scheduler (cost).
// Media is reached through the Media interface, so this package needs neither FFmpeg nor the
// network; routing/mediaresolver implements it over the fetcher and the decoder.
//
// One file per job: router.go (the Router, its Config and Hooks), result.go (Input and the outcome
// types Result, Candidate and MediaSummary, which caddymodule's Decision and explain use as they
// are), path.go (ClassifyPath, the one path rule, shared with the handler), route.go (Route, the
// steps in order), prompt.go (prompt tokens, text prefix, the hashed view), runmemo.go (a text
// chat's block hashes over its runs, HashTextRuns, with the block memo in the replayed turns'
// notes), mediaview.go and
// cohort.go (the media view and the model's contract cohort), score.go (overlap, cost, ranking,
// load accounting), forward.go (the forwarded uuids), verify.go (run-time layout verification),
// worker.go (the worker record), stages.go (stage timing), media.go (the media port).
//
// The prompt-pieces seam: a text chat is rendered as pieces (chat.Prompt, []jinja.Piece) and
// encoded as runs (model.Model.EncodePromptRuns); the tokenizer returns the ids and, for a
// replayed turn's run, a tokenizer.RunKey naming its note. The router owns what it derives from
// the ids: the hashes of the blocks inside a keyed run are kept in the run's note, in the
// router's own slot (jinja.NoteKey), for the last alignment, block size and seed they were
// hashed at, and reused while the key, alignment, block size and seed recur (runmemo.go).
//
// Lock order: docs/LOCKS.md (Router.mu and verifier.mu are leaves).
package router
