package media

import (
	"bytes"
	"encoding/binary"
	"io"
	"strconv"
	"time"
)

// jpegEXIF is what the client reads of a JPEG's EXIF (its APP1 segment's
// TIFF structure): the capture time with its offset, the orientation, the
// size and the position. It is read here rather than by imagemeta, which a
// damaged JPEG can send into an endless loop (FuzzProbe found one): this
// walk advances at every step and reads each IFD once.
type jpegEXIF struct {
	taken       time.Time
	offsetKnown bool
	orientation int
	width       int
	height      int
	hasGPS      bool
	lat, lon    float64
}

// maxJPEGHead is how much of a JPEG is searched for its EXIF: the APP
// segments come before the image data, and APP1 is at most 64 KiB.
const maxJPEGHead = 256 << 10

// readJPEGEXIF reads the EXIF of the JPEG r, ok false when it has none
// that parses.
func readJPEGEXIF(r io.Reader) (jpegEXIF, bool) {
	head, err := io.ReadAll(io.LimitReader(r, maxJPEGHead))
	if err != nil || len(head) < 4 || head[0] != 0xff || head[1] != 0xd8 {
		return jpegEXIF{}, false
	}
	for i := 2; i+4 <= len(head); {
		if head[i] != 0xff {
			return jpegEXIF{}, false
		}
		marker := head[i+1]
		switch {
		case marker == 0xff: // fill byte
			i++
			continue
		case marker == 0xd8, marker == 0x01, marker >= 0xd0 && marker <= 0xd7: // no length
			i += 2
			continue
		case marker == 0xd9 || marker == 0xda: // end of image, start of scan
			return jpegEXIF{}, false
		}
		n := int(binary.BigEndian.Uint16(head[i+2:]))
		if n < 2 || i+2+n > len(head) {
			return jpegEXIF{}, false
		}
		segment := head[i+4 : i+2+n]
		if marker == 0xe1 && bytes.HasPrefix(segment, []byte("Exif\x00\x00")) {
			return parseTIFF(segment[6:])
		}
		i += 2 + n
	}
	return jpegEXIF{}, false
}

// tiff reads a TIFF structure's values in its byte order, every read
// bounds-checked.
type tiff struct {
	b     []byte
	order binary.ByteOrder
}

// entry is one IFD entry: its type, count and the bytes of its value.
type tiffEntry struct {
	typ   uint16
	count uint32
	value []byte
}

var tiffTypeSize = map[uint16]int{1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 7: 1, 9: 4, 10: 8}

// maxIFDEntries bounds an IFD: cameras write a few dozen.
const maxIFDEntries = 1024

// ifd reads the IFD at off into tag → entry, nil when it does not parse.
func (t tiff) ifd(off uint32) map[uint16]tiffEntry {
	if int64(off)+2 > int64(len(t.b)) {
		return nil
	}
	n := int(t.order.Uint16(t.b[off:]))
	if n > maxIFDEntries || int64(off)+2+int64(n)*12 > int64(len(t.b)) {
		return nil
	}
	out := make(map[uint16]tiffEntry, n)
	for k := range n {
		e := t.b[int(off)+2+k*12:][:12]
		typ, count := t.order.Uint16(e[2:]), t.order.Uint32(e[4:])
		size, known := tiffTypeSize[typ]
		if !known || count > 1<<16 {
			continue
		}
		total := int64(size) * int64(count)
		value := e[8:12]
		if total > 4 {
			at := int64(t.order.Uint32(e[8:]))
			if at+total > int64(len(t.b)) {
				continue
			}
			value = t.b[at : at+total]
		}
		out[t.order.Uint16(e)] = tiffEntry{typ: typ, count: count, value: value[:total]}
	}
	return out
}

// uint is an entry's first value as an unsigned integer (SHORT or LONG).
func (t tiff) uint(e tiffEntry, ok bool) (uint32, bool) {
	switch {
	case !ok || e.count < 1:
		return 0, false
	case e.typ == 3:
		return uint32(t.order.Uint16(e.value)), true
	case e.typ == 4:
		return t.order.Uint32(e.value), true
	}
	return 0, false
}

// ascii is an ASCII entry's text, without its terminating zero.
func ascii(e tiffEntry, ok bool) string {
	if !ok || e.typ != 2 {
		return ""
	}
	return string(bytes.TrimRight(e.value, "\x00 "))
}

// degrees is a GPS coordinate: three RATIONALs, degrees, minutes, seconds.
func (t tiff) degrees(e tiffEntry, ok bool) (float64, bool) {
	if !ok || e.typ != 5 || e.count != 3 {
		return 0, false
	}
	var v float64
	for k, scale := range []float64{1, 60, 3600} {
		num, den := t.order.Uint32(e.value[k*8:]), t.order.Uint32(e.value[k*8+4:])
		if den == 0 {
			return 0, false
		}
		v += float64(num) / float64(den) / scale
	}
	return v, true
}

// parseTIFF reads the tags the client uses from a TIFF structure: IFD0,
// the Exif IFD and the GPS IFD it points to, each once.
func parseTIFF(b []byte) (jpegEXIF, bool) {
	if len(b) < 8 {
		return jpegEXIF{}, false
	}
	t := tiff{b: b}
	switch string(b[:4]) {
	case "II*\x00":
		t.order = binary.LittleEndian
	case "MM\x00*":
		t.order = binary.BigEndian
	default:
		return jpegEXIF{}, false
	}
	ifd0 := t.ifd(t.order.Uint32(b[4:]))
	if ifd0 == nil {
		return jpegEXIF{}, false
	}
	var x jpegEXIF
	if o, ok := t.uint(entryOf(ifd0, 0x0112)); ok && o >= 1 && o <= 8 {
		x.orientation = int(o)
	}
	if off, ok := t.uint(entryOf(ifd0, 0x8769)); ok {
		if exif := t.ifd(off); exif != nil {
			x.readTime(ascii(entryOf(exif, 0x9003)), ascii(entryOf(exif, 0x9011)))
			w, wok := t.uint(entryOf(exif, 0xa002))
			h, hok := t.uint(entryOf(exif, 0xa003))
			if wok && hok {
				x.width, x.height = int(w), int(h)
			}
		}
	}
	if off, ok := t.uint(entryOf(ifd0, 0x8825)); ok {
		if gps := t.ifd(off); gps != nil {
			lat, latOK := t.degrees(entryOf(gps, 0x0002))
			lon, lonOK := t.degrees(entryOf(gps, 0x0004))
			if latOK && lonOK && lat <= 90 && lon <= 180 {
				if ascii(entryOf(gps, 0x0001)) == "S" {
					lat = -lat
				}
				if ascii(entryOf(gps, 0x0003)) == "W" {
					lon = -lon
				}
				x.hasGPS, x.lat, x.lon = true, lat, lon
			}
		}
	}
	return x, true
}

func entryOf(ifd map[uint16]tiffEntry, tag uint16) (tiffEntry, bool) {
	e, ok := ifd[tag]
	return e, ok
}

// readTime reads DateTimeOriginal ("YYYY:MM:DD HH:MM:SS") and, when given,
// OffsetTimeOriginal ("+HH:MM").
func (x *jpegEXIF) readTime(when, offset string) {
	t, err := time.Parse("2006:01:02 15:04:05", when)
	if err != nil || t.Year() <= 1900 {
		return
	}
	x.taken = t
	if len(offset) == 6 && (offset[0] == '+' || offset[0] == '-') && offset[3] == ':' {
		h, herr := strconv.Atoi(offset[1:3])
		m, merr := strconv.Atoi(offset[4:6])
		if herr == nil && merr == nil && h <= 18 && m < 60 {
			secs := h*3600 + m*60
			if offset[0] == '-' {
				secs = -secs
			}
			x.taken = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.FixedZone(offset, secs))
			x.offsetKnown = true
		}
	}
}
