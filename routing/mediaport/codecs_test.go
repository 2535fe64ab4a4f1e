package mediaport_test

import (
	"slices"
	"testing"

	"github.com/kvroute/kvroute/routing/mediaport"
)

func TestParseCodecs(t *testing.T) {
	c, err := mediaport.ParseCodecs([]string{"vp9", "h264", "vp8", "h264"})
	if err != nil || !slices.Equal(c, mediaport.Codecs{"h264", "vp8", "vp9"}) || c.String() != "h264,vp8,vp9" {
		t.Fatalf("got %v %v", c, err)
	}
	if !c.Allows("h264") || c.Allows("hevc") || c.Allows("") {
		t.Error("Allows disagrees with the list")
	}
	var def mediaport.Codecs
	if !def.Allows("vp8") || !def.Allows("vp9") || def.Allows("h264") || def.Allows("av1") || def.String() != "vp8,vp9" {
		t.Error("the nil list is not vp8, vp9")
	}
	for _, bad := range [][]string{nil, {}, {"H264"}, {"vp9", "mpeg4"}, {"avc"}} {
		if _, err := mediaport.ParseCodecs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
