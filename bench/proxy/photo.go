package main

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
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

// screenshot is a 3840×2160 PNG like a desktop screenshot (flat panels, a window of text-like
// glyph rows, a noisy photo thumbnail, a gradient wallpaper), by Go's encoder, made once.
var screenshot = sync.OnceValue(func() []byte {
	const w, h = 3840, 2160
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(3, 9))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := [3]uint8{uint8(30 + y*60/h), uint8(40 + x*50/w), 90}
			switch {
			case x > 200 && x < 2000 && y > 150 && y < 1800: // a window: white with text rows
				c = [3]uint8{250, 250, 250}
				if (y-150)%28 < 16 && (x/9+y/28)%7 != 0 && (x*31+y*17)%5 < 3 {
					c = [3]uint8{20, 20, 30}
				}
			case x > 2100 && x < 3700 && y > 300 && y < 1300: // a photo thumbnail
				c = [3]uint8{uint8(x/7 + r.IntN(24)), uint8(y/5 + r.IntN(24)), uint8(r.IntN(64) + 100)}
			case y < 40: // a panel
				c = [3]uint8{45, 45, 48}
			}
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c[0], c[1], c[2], 255
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
})

// serveScreenshot is servePhoto for screenshot: with ?n=<k> the bytes end with k after the IEND
// chunk, which PNG decoders do not read.
func serveScreenshot(w http.ResponseWriter, r *http.Request) {
	b, etag := screenshot(), `"shot"`
	if n := r.URL.Query().Get("n"); n != "" {
		if _, err := strconv.Atoi(n); err == nil {
			b, etag = append(append([]byte(nil), b...), n...), `"shot-`+n+`"`
		}
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("ETag", etag)
	http.ServeContent(w, r, "screenshot.png", photoTime, bytes.NewReader(b))
}
