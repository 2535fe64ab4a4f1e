package layout

// HubContractJSON is the example contract of DESIGN.md §2.3: current vLLM (transformers ≥ 5.15)
// serving Qwen3-VL with the Hugging Face hub processor settings (hf_fps at 2 fps, 4–768 frames,
// whole-clip budget 4096–25165824 pixels). kvroute-sim publishes it by default; tests use it.
const HubContractJSON = `{"schema": "kvroute.video_contract/v1", "adapter": "qwen3_vl", "engine": "vllm",
 "sampler": {"kind": "hf_fps", "fps": 2.0, "min_frames": 4, "max_frames": 768, "num_frames": null},
 "frame_count_source": "decoded",
 "resize": {"mode": "round_ties_even", "min_pixels": 4096, "max_pixels": 25165824,
            "patch_size": 16, "merge_size": 2, "temporal_patch_size": 2},
 "image_resize": {"min_pixels": 65536, "max_pixels": 16777216},
 "placeholder_target": "bare_video_token",
 "timestamp_tokenization": "spliced",
 "token_ids": {"vision_start": 151652, "vision_end": 151653, "image_pad": 151655, "video_pad": 151656},
 "video_pruning_rate": 0.0,
 "sglang_preprocess": null}`
