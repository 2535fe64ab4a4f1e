package main

import (
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
)

// h264Clips are the workload's H.264 clips (testdata/video-codecs and testdata/video): phone-like
// MP4 and MKV files, with B-frames, without, 4:4:4, an edit list and a lossless one. The MP4/MKV
// pair is one stream in two containers: the same identity when decoded, two keys when not.
var h264Clips = []string{
	"video-codecs/h264_bf3_640x360_30fps_3s.mp4",
	"video-codecs/h264_bf3_640x360_30fps_3s.mkv",
	"video-codecs/h264_nobf_480x270_24fps_2s.mkv",
	"video-codecs/h264_yuv444_333x197_24fps_2s.mkv",
	"video-codecs/h264_elst_trim0.5s.mp4",
	"video-codecs/h264_lossless_vp9first1s_640x360.mp4",
	"video/h264_640x360_30fps_3s.mp4",
}

// clipServer serves testdata/ on a loopback port for the run (the workers and kvroute fetch the
// clips from it); stop closes it.
func clipServer(testdata string) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(testdata))}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// h264Workload is workload C (issue 29): Zipf-drawn H.264 clips sent as video_url parts, the video
// first in the user message and one of 5 questions after it, behind the fixed system prompt: the
// text before the clip is the same on every request, so only the clip tells the workers apart.
func h264Workload(c workloadConfig, base string) []request {
	r := rand.New(rand.NewPCG(c.Seed, 0x264))
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(h264Clips)-1))
	out := make([]request, 0, c.N)
	for len(out) < c.N {
		clip := base + "/" + h264Clips[zipf.Uint64()]
		q := questions[r.IntN(len(questions))]
		b, err := json.Marshal(map[string]any{
			"model": "kvroute-sim", "max_tokens": c.MaxTokens, "stream": true,
			"stream_options": map[string]bool{"include_usage": true},
			"messages": []any{
				map[string]any{"role": "system", "content": systemPrompt},
				map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "video_url", "video_url": map[string]string{"url": clip}},
					map[string]any{"type": "text", "text": q},
				}},
			},
		})
		if err != nil {
			panic(err) // maps of strings and ints always marshal
		}
		out = append(out, request{Body: b, After: -1, Kind: "h264"})
	}
	return out
}
