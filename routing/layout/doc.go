// Package layout rebuilds the exact token layout a worker (vLLM or SGLang serving Qwen3-VL, vLLM
// serving NVIDIA Nemotron 3 Nano Omni) produces for each video and image of a chat request
// (DESIGN.md §4), from the worker's published video contract (DESIGN.md §2.3).
//
// The pieces, each transcribed from the upstream code named on it:
//   - frame samplers (hf_fps, uniform_num_frames, dynamo_max_frames, sglang) in sample.go;
//   - smart_resize for video and images, and SGLang's factor-28 pre-resize, in resize.go;
//   - group timestamps and their texts in timestamps.go;
//   - the contract, its validation, JCS digest and the cohort rule in contract.go, jcs.go, cohort.go;
//   - model files (config.json token ids, processor configs) in model.go;
//   - the Qwen3-VL adapter (layouts, replacement tokens) in qwen3vl.go and the prompt expansion
//     (worker-visible tokens and media spans) in expand.go;
//   - the Nemotron 3 Nano Omni adapter (golden/nemotron/README.md is the authority): vLLM's opencv
//     and opencv_dynamic samplers in nemotron_sample.go, the patch grid, EVS, timestamps and
//     separators in nemotron_video.go, the dynamic-resolution image budget in nemotron_image.go, its
//     contract object and model folder checks in nemotron_contract.go and nemotron_model.go, the
//     expansion in nemotron.go; Adapter (adapter.go) selects an adapter by the contract.
//
// Everything here is pure computation: safe for concurrent use, no I/O except the model file readers.
package layout
