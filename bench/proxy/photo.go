package main

import (
	"bytes"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// photo is a 3840×2160 JPEG (quality 95, 4:2:0) of a smooth scene with fine noise, about the
// size of a phone photo or a 4K screenshot (3-5 MB), made once.
var photo = sync.OnceValue(func() []byte {
	const w, h = 3840, 2160
	img := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	r := rand.New(rand.NewPCG(4, 2))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Y[y*img.YStride+x] = uint8(x*255/w/2 + y*255/h/2 + r.IntN(48))
		}
	}
	for y := 0; y < h/2; y++ {
		for x := 0; x < w/2; x++ {
			img.Cb[y*img.CStride+x] = uint8(96 + x*64/(w/2) + r.IntN(16))
			img.Cr[y*img.CStride+x] = uint8(160 - y*64/(h/2) + r.IntN(16))
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		panic(err)
	}
	return b.Bytes()
})

// servePhoto serves photo with an ETag and a Last-Modified date, answering conditional requests
// with 304 (http.ServeContent), as a CDN or object store does; with ?n=<k> the bytes end with k
// (after the JPEG's end marker, which decoders ignore), so each k is a new file to a cache keyed
// by bytes, with the same pixels.
func servePhoto(w http.ResponseWriter, r *http.Request) {
	b, etag := photo(), `"photo"`
	if n := r.URL.Query().Get("n"); n != "" {
		if _, err := strconv.Atoi(n); err == nil {
			b, etag = append(append([]byte(nil), b...), n...), `"photo-`+n+`"`
		}
	}
	w.Header().Set("Content-Type", "image/jpeg")
	w.Header().Set("ETag", etag)
	http.ServeContent(w, r, "photo.jpg", photoTime, bytes.NewReader(b))
}

var photoTime = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
