// Package layout rebuilds the exact token layout a worker (vLLM or SGLang serving Qwen3-VL) produces
// for each video and image of a chat request (DESIGN.md §4), from the worker's published video
// contract (DESIGN.md §2.3).
//
// The pieces, each transcribed from the upstream code named on it:
//   - frame samplers (hf_fps, uniform_num_frames, dynamo_max_frames, sglang) in sample.go;
//   - smart_resize for video and images, and SGLang's factor-28 pre-resize, in resize.go;
//   - group timestamps and their texts in timestamps.go;
//   - the contract, its validation, JCS digest and the cohort rule in contract.go, jcs.go, cohort.go;
//   - model files (config.json token ids, processor configs) in model.go;
//   - the Qwen3-VL adapter (layouts, replacement tokens) in qwen3vl.go and the prompt expansion
//     (worker-visible tokens and media spans) in expand.go.
//
// Everything here is pure computation: safe for concurrent use, no I/O except the model file readers.
package layout
