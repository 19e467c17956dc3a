// Package mediatest makes photos for the client's tests: real JPEGs with
// the EXIF a camera writes (capture time and zone, orientation, location,
// a description), so tests exercise the parsers on the bytes they meet in
// a photo folder. It is imported by tests only.
package mediatest

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
)

// EXIF is what JPEG writes into a photo's APP1 segment; zero fields are
// left out.
type EXIF struct {
	// DateTimeOriginal is "YYYY:MM:DD HH:MM:SS"; Offset "+HH:MM".
	DateTimeOriginal string
	Offset           string
	Orientation      uint16
	// Latitude and Longitude in degrees, north and east positive.
	Latitude, Longitude float64
	HasLocation         bool
	Description         string
}

// JPEG is a w×h photo of a gradient (seed shifts it, so photos differ),
// with e as its EXIF.
func JPEG(w, h int, seed byte, e EXIF) []byte {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{R: byte(x) + seed, G: byte(y), B: seed, A: 255})
		}
	}
	var body bytes.Buffer
	if err := jpeg.Encode(&body, m, &jpeg.Options{Quality: 90}); err != nil {
		panic(err)
	}
	b := body.Bytes()
	app1 := append([]byte("Exif\x00\x00"), tiff(e)...)
	var out bytes.Buffer
	out.Write(b[:2]) // SOI
	out.Write([]byte{0xff, 0xe1})
	binary.Write(&out, binary.BigEndian, uint16(len(app1)+2))
	out.Write(app1)
	out.Write(b[2:])
	return out.Bytes()
}

// PNG is a w×h PNG of a gradient.
func PNG(w, h int) []byte {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.Set(x, y, color.RGBA{R: byte(x * 10), G: byte(y * 10), B: 100, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// entry is one IFD entry; value holds its bytes, written inline when they
// fit in four.
type entry struct {
	tag, typ uint16
	count    uint32
	value    []byte
}

const (
	typeASCII    = 2
	typeShort    = 3
	typeLong     = 4
	typeRational = 5
)

func ascii(tag uint16, s string) entry {
	return entry{tag, typeASCII, uint32(len(s) + 1), append([]byte(s), 0)}
}

func short(tag, v uint16) entry {
	return entry{tag, typeShort, 1, binary.BigEndian.AppendUint16(nil, v)}
}

func long(tag uint16, v uint32) entry {
	return entry{tag, typeLong, 1, binary.BigEndian.AppendUint32(nil, v)}
}

// degrees is a GPS coordinate as three rationals: degrees, minutes and
// hundredths of seconds.
func degrees(tag uint16, v float64) entry {
	if v < 0 {
		v = -v
	}
	d := uint32(v)
	m := uint32((v - float64(d)) * 60)
	s := uint32(((v-float64(d))*60 - float64(m)) * 60 * 100)
	var b []byte
	for _, r := range [][2]uint32{{d, 1}, {m, 1}, {s, 100}} {
		b = binary.BigEndian.AppendUint32(b, r[0])
		b = binary.BigEndian.AppendUint32(b, r[1])
	}
	return entry{tag, typeRational, 3, b}
}

// tiff is a big-endian TIFF structure: IFD0, then the Exif IFD and the GPS
// IFD it points to, each followed by the values that do not fit inline.
func tiff(e EXIF) []byte {
	var ifd0, exif, gps []entry
	if e.Description != "" {
		ifd0 = append(ifd0, ascii(0x010e, e.Description))
	}
	if e.Orientation != 0 {
		ifd0 = append(ifd0, short(0x0112, e.Orientation))
	}
	if e.DateTimeOriginal != "" {
		exif = append(exif, ascii(0x9003, e.DateTimeOriginal))
	}
	if e.Offset != "" {
		exif = append(exif, ascii(0x9011, e.Offset))
	}
	if e.HasLocation {
		ns, ew := "N", "E"
		if e.Latitude < 0 {
			ns = "S"
		}
		if e.Longitude < 0 {
			ew = "W"
		}
		gps = append(gps, ascii(0x0001, ns), degrees(0x0002, e.Latitude), ascii(0x0003, ew), degrees(0x0004, e.Longitude))
	}
	// Offsets count from the TIFF header; each IFD is 2 + 12n + 4 bytes,
	// then its out-of-line values.
	size := func(es []entry) int {
		n := 2 + 12*len(es) + 4
		for _, x := range es {
			if len(x.value) > 4 {
				n += len(x.value) + len(x.value)%2
			}
		}
		return n
	}
	ifd0 = append(ifd0, long(0x8769, 0), long(0x8825, 0)) // pointers, set below
	exifAt := 8 + size(ifd0)
	gpsAt := exifAt + size(exif)
	ifd0[len(ifd0)-2] = long(0x8769, uint32(exifAt))
	ifd0[len(ifd0)-1] = long(0x8825, uint32(gpsAt))
	out := []byte("MM\x00\x2a\x00\x00\x00\x08")
	for _, es := range [][]entry{ifd0, exif, gps} {
		out = writeIFD(out, es)
	}
	return out
}

func writeIFD(out []byte, es []entry) []byte {
	start := len(out)
	out = binary.BigEndian.AppendUint16(out, uint16(len(es)))
	extra := start + 2 + 12*len(es) + 4
	var values []byte
	for _, x := range es {
		out = binary.BigEndian.AppendUint16(out, x.tag)
		out = binary.BigEndian.AppendUint16(out, x.typ)
		out = binary.BigEndian.AppendUint32(out, x.count)
		if len(x.value) <= 4 {
			out = append(out, x.value...)
			out = append(out, make([]byte, 4-len(x.value))...)
			continue
		}
		out = binary.BigEndian.AppendUint32(out, uint32(extra+len(values)))
		values = append(values, x.value...)
		if len(x.value)%2 == 1 {
			values = append(values, 0)
		}
	}
	out = binary.BigEndian.AppendUint32(out, 0) // no next IFD
	return append(out, values...)
}
