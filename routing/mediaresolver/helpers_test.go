package mediaresolver_test

import (
	"testing"

	"github.com/kvroute/kvroute/internal/testkit/imagetest"
	"github.com/kvroute/kvroute/media/picture"
	"github.com/kvroute/kvroute/routing/mediaport"
)

// readImage returns testdata/image/<name> (testdata/SOURCE.md, "image/").
func readImage(t *testing.T, name string) []byte { return imagetest.Read(t, name) }

// decodePicture is picture.Decode in the port's form, the identity and size Resolver.Image must
// give for data.
func decodePicture(data []byte) (*mediaport.ImageInfo, error) {
	p, err := picture.Decode(data)
	if err != nil {
		return nil, err
	}
	return (*mediaport.ImageInfo)(p), nil
}
