// Package ssrftrap holds the server-side request forgery cases of issue 24 and a trap that counts
// what reaches it. Every case is a file a client could send as a video (data: URL or fetched URL)
// whose bytes name other URLs (DASH and HLS manifests, ffconcat lists, SDP sessions, protocol
// references such as subfile: and concat:, an MP4 external data reference, Matroska chapters and
// attachments): a decoder that follows any of them connects to the trap. Only tests import it.
package ssrftrap

import (
	"bytes"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

//go:embed inputs
var inputs embed.FS

// Placeholder is the 5-byte port text in the input templates; Case bytes carry the trap's port
// there, zero-padded to 5 digits, so binary templates keep their sizes.
const Placeholder = "PORTX"

// Hosts are the two loopback addresses the cases point at.
var Hosts = [2]string{"127.0.0.1", "127.0.0.2"}

// Case is one input.
type Case struct {
	Name string // short, unique
	// Data are the bytes sent as the video.
	Data []byte
	// MIME is the type a server would send (also the data: URL's type); Ext the file name
	// extension it would be served under, with the dot.
	MIME, Ext string
}

// Cases returns every input with its URLs pointing at port (0 leaves the placeholder's
// replacement as 00009, the discard port, for the fuzz corpus).
func Cases(port int) ([]Case, error) {
	p := fmt.Sprintf("%05d", port)
	if port == 0 {
		p = "00009"
	}
	read := func(name string) ([]byte, error) {
		b, err := inputs.ReadFile("inputs/" + name)
		if err != nil {
			return nil, err
		}
		return bytes.ReplaceAll(b, []byte(Placeholder), []byte(p)), nil
	}
	var out []Case
	for _, c := range []struct{ name, file, mime, ext string }{
		{"dash", "dash.mpd", "application/dash+xml", ".mpd"},
		{"hls_master", "hls_master.m3u8", "application/vnd.apple.mpegurl", ".m3u8"},
		{"hls_media", "hls_media.m3u8", "application/vnd.apple.mpegurl", ".m3u8"},
		{"hls_protocols", "hls_protocols.m3u8", "application/vnd.apple.mpegurl", ".m3u8"},
		{"m3u_plain", "m3u_plain.m3u8", "audio/mpegurl", ".m3u"},
		{"ffconcat", "list.ffconcat", "text/plain", ".ffconcat"},
		{"sdp", "session.sdp", "application/sdp", ".sdp"},
		{"mkv_chapters_attachment", "chapters_url.mkv", "video/x-matroska", ".mkv"},
		{"webm_chapters", "chapters_url.webm", "video/webm", ".webm"},
	} {
		b, err := read(c.file)
		if err != nil {
			return nil, err
		}
		out = append(out, Case{Name: c.name, Data: b, MIME: c.mime, Ext: c.ext})
		// The same bytes dressed as a plain WebM: no manifest name or type to go by.
		if c.ext != ".webm" && c.ext != ".mkv" {
			out = append(out, Case{Name: c.name + "_as_webm", Data: b, MIME: "video/webm", Ext: ".webm"})
		}
	}
	base, err := read("vp9_2frames.mp4")
	if err != nil {
		return nil, err
	}
	dref, err := DrefMP4(base, "http://"+Hosts[0]+":"+p+"/dref.mp4", "/kvroute-ssrftrap/"+Hosts[1]+"/external.mp4")
	if err != nil {
		return nil, err
	}
	out = append(out, Case{Name: "mp4_external_dref", Data: dref, MIME: "video/mp4", Ext: ".mp4"})
	return out, nil
}

// ProtocolURLs are video URLs that are FFmpeg protocol references themselves (subfile:, concat:,
// and friends): a fetcher must refuse them before any byte is read.
func ProtocolURLs(port int) []string {
	a, b := net.JoinHostPort(Hosts[0], strconv.Itoa(port)), net.JoinHostPort(Hosts[1], strconv.Itoa(port))
	return []string{
		"subfile,,start,0,end,0,,:http://" + a + "/x.webm",
		"concat:http://" + a + "/a.webm|http://" + b + "/b.webm",
		"hls+http://" + a + "/x.m3u8",
		"tcp://" + b + "/",
		"rtp://" + a,
	}
}

// DrefMP4 rewrites a faststart MP4 with one track so that its data reference box lists a 'url '
// entry for url and a Mac alias ('alis') entry with the absolute path path, the entry the track's
// samples point at: a demuxer that resolves external data references opens path (or url) for
// the samples. Box sizes of the parents and the chunk offsets (stco) are adjusted.
func DrefMP4(mp4 []byte, url, path string) ([]byte, error) {
	if len(path) > 255 || len(path)%2 != 0 {
		return nil, errors.New("ssrftrap: alias path must be even-length and short")
	}
	var dref bytes.Buffer
	entry := func(typ string, flags uint32, body []byte) {
		_ = binary.Write(&dref, binary.BigEndian, uint32(12+len(body)))
		dref.WriteString(typ)
		_ = binary.Write(&dref, binary.BigEndian, flags)
		dref.Write(body)
	}
	dref.Write([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}) // size (patched), 'dref', version+flags, 2 entries
	copy(dref.Bytes()[4:8], "dref")
	entry("url ", 0, append([]byte(url), 0)) // flags 0: the data is not in this file
	// The alias record FFmpeg's mov_read_dref parses (libavformat/mov.c, FFmpeg 8.1): 10 skipped
	// bytes, volume (1+27), 12 skipped, file name (1+63), 16 skipped, nlvl_from/to, 16 skipped,
	// then typed fields; type 2 is the absolute path.
	alis := make([]byte, 150)
	alis[10] = 3
	copy(alis[11:], "Mac")
	alis[50] = 12
	copy(alis[51:], "external.mp4")
	binary.BigEndian.PutUint16(alis[130:], 0) // nlvl_from: 0 = absolute reference
	binary.BigEndian.PutUint16(alis[132:], 0)
	alis = binary.BigEndian.AppendUint16(alis, 2)
	alis = binary.BigEndian.AppendUint16(alis, uint16(len(path)))
	alis = append(alis, path...)
	alis = append(alis, 0xff, 0xff, 0, 0)
	entry("alis", 0, alis)
	nd := dref.Bytes()
	binary.BigEndian.PutUint32(nd[0:], uint32(len(nd)))

	// find the chain moov/trak/mdia/minf/dinf/dref
	chain := []string{"moov", "trak", "mdia", "minf", "dinf", "dref"}
	var parents []int // offsets of the boxes on the chain
	off, end := 0, len(mp4)
	for _, name := range chain {
		found := false
		for off+8 <= end {
			sz := int(binary.BigEndian.Uint32(mp4[off:]))
			if sz < 8 || off+sz > end {
				return nil, errors.New("ssrftrap: bad box size")
			}
			if string(mp4[off+4:off+8]) == name {
				parents = append(parents, off)
				end = off + sz
				off += 8
				found = true
				break
			}
			off += sz
		}
		if !found {
			return nil, fmt.Errorf("ssrftrap: no %s box", name)
		}
	}
	at := parents[len(parents)-1]
	oldSize := int(binary.BigEndian.Uint32(mp4[at:]))
	delta := len(nd) - oldSize
	out := append(append(append([]byte{}, mp4[:at]...), nd...), mp4[at+oldSize:]...)
	for _, p := range parents[:len(parents)-1] {
		binary.BigEndian.PutUint32(out[p:], binary.BigEndian.Uint32(out[p:])+uint32(delta))
	}
	// moov precedes mdat (faststart): every chunk offset moves by delta.
	i := bytes.Index(out, []byte("stco"))
	if i < 4 {
		return nil, errors.New("ssrftrap: no stco box")
	}
	n := int(binary.BigEndian.Uint32(out[i+8:]))
	for k := 0; k < n; k++ {
		o := i + 12 + 4*k
		binary.BigEndian.PutUint32(out[o:], binary.BigEndian.Uint32(out[o:])+uint32(delta))
	}
	return out, nil
}

// Trap listens on one port of both Hosts, TCP and UDP, and counts connections and datagrams.
type Trap struct {
	Port  int
	conns atomic.Int64
	marks atomic.Int64 // Settle's own connections and datagrams
	mu    sync.Mutex
	log   []string // what arrived, for the failure message
	lns   []net.Listener
	pcs   []net.PacketConn
	wg    sync.WaitGroup
}

// Start opens the trap on a port free on both hosts, TCP and UDP; it closes at the test's end.
func Start(tb testing.TB) *Trap {
	tb.Helper()
	t := &Trap{}
	for range 200 {
		port := 20000 + rand.IntN(12000)
		if t.listen(port) == nil {
			t.Port = port
			tb.Cleanup(t.close)
			return t
		}
		t.close()
		t.lns, t.pcs = nil, nil
	}
	tb.Fatal("ssrftrap: no port free on both loopback addresses")
	return nil
}

func (t *Trap) listen(port int) error {
	for _, h := range Hosts {
		addr := net.JoinHostPort(h, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		t.lns = append(t.lns, ln)
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		t.pcs = append(t.pcs, pc)
	}
	for _, ln := range t.lns {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				buf := make([]byte, 256)
				n, _ := c.Read(buf) // the request line names the demuxer's URL
				t.hit(fmt.Sprintf("tcp %s: %q", ln.Addr(), buf[:n]))
				c.Close()
			}
		}()
	}
	for _, pc := range t.pcs {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			buf := make([]byte, 2048)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				t.hit(fmt.Sprintf("udp %s from %s: %q", pc.LocalAddr(), from, buf[:min(n, 64)]))
			}
		}()
	}
	return nil
}

const mark = "KVROUTE-SSRFTRAP-MARK"

func (t *Trap) hit(s string) {
	if strings.Contains(s, mark) {
		t.marks.Add(1)
		return
	}
	t.conns.Add(1)
	t.mu.Lock()
	t.log = append(t.log, s)
	t.mu.Unlock()
}

func (t *Trap) close() {
	for _, ln := range t.lns {
		ln.Close()
	}
	for _, pc := range t.pcs {
		pc.Close()
	}
	t.wg.Wait()
}

// Settle sends one marked connection and one marked datagram to every listener and waits until
// all arrived: a connection or datagram that reached the kernel before Settle was called has been
// counted when it returns (listeners accept in order; loopback UDP is not reordered).
func (t *Trap) Settle(tb testing.TB) {
	tb.Helper()
	want := t.marks.Load()
	for i, ln := range t.lns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			tb.Fatal(err)
		}
		_, _ = c.Write([]byte(mark))
		c.Close()
		u, err := net.Dial("udp", t.pcs[i].LocalAddr().String())
		if err != nil {
			tb.Fatal(err)
		}
		_, _ = u.Write([]byte(mark))
		u.Close()
		want += 2
	}
	deadline := time.Now().Add(30 * time.Second)
	for t.marks.Load() < want {
		if time.Now().After(deadline) {
			tb.Fatalf("ssrftrap: markers not received (%d of %d)", t.marks.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Count returns the number of TCP connections plus UDP datagrams received so far.
func (t *Trap) Count() int64 { return t.conns.Load() }

// Log returns what arrived so far, one line each.
func (t *Trap) Log() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.log...)
}
