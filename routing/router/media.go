package router

import (
	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// Media fetches and decodes the media items of a request (routing/mediaport.Media).
type Media = mediaport.Media

// VideoInfo is what the router needs of one decoded clip (routing/mediaport.VideoInfo).
type VideoInfo = mediaport.VideoInfo

// ImageInfo is what the router needs of one decoded image (routing/mediaport.ImageInfo).
type ImageInfo = mediaport.ImageInfo

// Sampler returns the frame sampler of contract c for a clip of the given geometry
// (routing/mediaport.Sampler).
func Sampler(c *layout.Contract, total int, fps float64, width, height int) ([]int, error) {
	return mediaport.Sampler(c, total, fps, width, height)
}
