package media

// The FFmpeg version check (internal/ffmpegpin): a build against the wrong FFmpeg says so.
import _ "github.com/kvroute/kvroute/internal/ffmpegpin"
