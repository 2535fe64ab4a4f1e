// Package router is kvroute's Caddy-free decision core: it takes one OpenAI request body and the
// current worker list and returns where the request should go and why (DESIGN.md §1 steps 1–6).
//
// It ties the other routing packages together: chat (parse, template), model (tokens), layout
// (contracts, Qwen3-VL expansion), blocks (LocalBlockHash), index (overlap) and scheduler (cost).
// Media is reached through the Media interface, so this package needs neither FFmpeg nor the
// network; media/resolver implements it over the fetcher and the decoder.
//
// Lock order: docs/LOCKS.md (Router.mu and verifier.mu are leaves).
package router
