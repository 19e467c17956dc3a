package cli

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
)

// encodedFrame is one frame the browser's VP8 encoder made.
type encodedFrame struct {
	Key  bool   `json:"key"`
	Time int64  `json:"time"` // microseconds
	Data string `json:"data"` // standard base64
}

// browserVideo has the browser encode a VP8 video of noise (which no
// encoder can shrink, so its size follows the bitrate) with WebCodecs, and
// muxes it into a WebM file with cues, so that a player seeks by ranges.
func browserVideo(t *testing.T, ctx context.Context, width, height, fps, seconds, bitrate int) []byte {
	t.Helper()
	blank := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>encoder</title>"))
	}))
	defer blank.Close()
	browserDo(t, ctx, chromedp.Navigate(blank.URL))
	frames := pageEval[[]encodedFrame](t, ctx, `(async () => {
		const [w, h, fps, n, bitrate] = [`+itoa(width)+`, `+itoa(height)+`, `+itoa(fps)+`, `+itoa(fps*seconds)+`, `+itoa(bitrate)+`];
		const out = [];
		const encoder = new VideoEncoder({
			output: (c) => {
				const b = new Uint8Array(c.byteLength);
				c.copyTo(b);
				let s = "";
				for (let i = 0; i < b.length; i += 8192) s += String.fromCharCode.apply(null, b.subarray(i, i + 8192));
				out.push({ key: c.type === "key", time: c.timestamp, data: btoa(s) });
			},
			error: (e) => { throw e; },
		});
		encoder.configure({ codec: "vp8", width: w, height: h, bitrate, framerate: fps });
		const canvas = new OffscreenCanvas(w, h);
		const g = canvas.getContext("2d");
		const img = g.createImageData(w, h);
		for (let i = 0; i < n; i++) {
			for (let j = 0; j < img.data.length; j += 65536) crypto.getRandomValues(img.data.subarray(j, j + 65536));
			g.putImageData(img, 0, 0);
			const frame = new VideoFrame(canvas, { timestamp: Math.round(i * 1e6 / fps) });
			encoder.encode(frame, { keyFrame: i % fps === 0 });
			frame.close();
			if (encoder.encodeQueueSize > 8) await new Promise((r) => encoder.addEventListener("dequeue", r, { once: true }));
		}
		await encoder.flush();
		return out;
	})()`)
	return webm(t, width, height, float64(seconds*1000), frames)
}

// webm muxes VP8 frames into a WebM file (Matroska: EBML header, then a
// segment of info, tracks, cues and one cluster per key frame). Every size
// is written in 8 bytes and every cue position as an 8-byte integer, so
// the cues' size does not depend on where the clusters are.
func webm(t *testing.T, width, height int, durationMS float64, frames []encodedFrame) []byte {
	t.Helper()
	var clusters [][]byte
	var times []uint64
	var cluster []byte
	var start int64
	flush := func() {
		if cluster != nil {
			clusters = append(clusters, ebml(0x1F43B675, append(ebmlUint(0xE7, uint64(start/1000)), cluster...)))
			times = append(times, uint64(start/1000))
		}
	}
	for _, f := range frames {
		data, err := base64.StdEncoding.DecodeString(f.Data)
		if err != nil {
			t.Fatal(err)
		}
		if f.Key {
			flush()
			cluster, start = []byte{}, f.Time
		}
		block := []byte{0x81, 0, 0, 0}
		binary.BigEndian.PutUint16(block[1:], uint16((f.Time-start)/1000))
		if f.Key {
			block[3] = 0x80
		}
		cluster = append(cluster, ebml(0xA3, append(block, data...))...)
	}
	flush()
	duration := make([]byte, 8)
	binary.BigEndian.PutUint64(duration, math.Float64bits(durationMS))
	info := ebml(0x1549A966, cat(ebmlUint(0x2AD7B1, 1_000_000), ebml(0x4489, duration), ebml(0x4D80, []byte("sealbox test")), ebml(0x5741, []byte("sealbox test"))))
	tracks := ebml(0x1654AE6B, ebml(0xAE, cat(ebmlUint(0xD7, 1), ebmlUint(0x73C5, 1), ebmlUint(0x83, 1), ebml(0x86, []byte("V_VP8")),
		ebml(0xE0, cat(ebmlUint(0xB0, uint64(width)), ebmlUint(0xBA, uint64(height)))))))
	cuesSize := len(ebml(0x1C53BB6B, cues(times, make([]uint64, len(times)))))
	positions := make([]uint64, len(clusters))
	at := uint64(len(info) + len(tracks) + cuesSize)
	for i, c := range clusters {
		positions[i] = at
		at += uint64(len(c))
	}
	segment := cat(info, tracks, ebml(0x1C53BB6B, cues(times, positions)))
	for _, c := range clusters {
		segment = append(segment, c...)
	}
	header := ebml(0x1A45DFA3, cat(ebmlUint(0x4286, 1), ebmlUint(0x42F7, 1), ebmlUint(0x42F2, 4), ebmlUint(0x42F3, 8),
		ebml(0x4282, []byte("webm")), ebmlUint(0x4287, 2), ebmlUint(0x4285, 2)))
	return cat(header, ebml(0x18538067, segment))
}

// cues are a cue point per cluster, its position as 8 bytes.
func cues(times, positions []uint64) []byte {
	var out []byte
	for i, tm := range times {
		pos := make([]byte, 8)
		binary.BigEndian.PutUint64(pos, positions[i])
		out = append(out, ebml(0xBB, cat(ebmlUint(0xB3, tm), ebml(0xB7, cat(ebmlUint(0xF7, 1), ebml(0xF1, pos)))))...)
	}
	return out
}

// ebml is one element: its id, its size as an 8-byte vint, its payload.
func ebml(id uint32, payload []byte) []byte {
	var out []byte
	for shift := 24; shift >= 0; shift -= 8 {
		if b := byte(id >> shift); b != 0 || len(out) > 0 {
			out = append(out, b)
		}
	}
	size := make([]byte, 8)
	binary.BigEndian.PutUint64(size, uint64(len(payload)))
	size[0] = 0x01
	return cat(out, size, payload)
}

func ebmlUint(id uint32, v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	i := 0
	for i < 7 && b[i] == 0 {
		i++
	}
	return ebml(id, b[i:])
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}
