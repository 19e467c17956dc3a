package media

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/evanoberholster/imagemeta"
	"github.com/evanoberholster/imagemeta/exif2"
	// The still formats Go decodes, registered for image.Decode.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"
)

// Where a capture time came from, most trusted first; the metadata blob
// records it (cli/sealed/FORMAT.md).
const (
	SourceEXIF     = "exif"
	SourceXMP      = "xmp"
	SourceFileName = "filename"
	SourceFileTime = "filetime"
)

// Probe is what the client reads of an asset's first original before
// sealing it.
type Probe struct {
	// Taken is when the photo or video was taken. With OffsetKnown it is
	// in its own zone (the offset the camera recorded); without, it is the
	// wall clock read as UTC, as a camera that records no zone gives it.
	Taken       time.Time
	OffsetKnown bool
	TimeSource  string
	// Width and Height are in pixels, as stored (before the orientation
	// is applied); 0 when unknown.
	Width, Height int
	// Orientation is EXIF's, 1 to 8; 1 when the file says none.
	Orientation int
	HasLocation bool
	Latitude    float64
	Longitude   float64
}

// ProbeFile reads path (of kind KindOf(path)) and the XMP sidecars of its
// asset. The capture time comes from the file's EXIF, else a sidecar's
// XMP, else a date in the file's name, else modTime, the file's own time.
// A file whose metadata cannot be read is probed from its name and time
// alone: ProbeFile does not fail.
func ProbeFile(path string, modTime time.Time, sidecars []string) Probe {
	p := Probe{Orientation: 1}
	kind := KindOf(path)
	if f, err := os.Open(path); err == nil {
		switch kind {
		case Image:
			readStillEXIF(f, &p)
			if p.Width == 0 {
				if _, err := f.Seek(0, io.SeekStart); err == nil {
					if cfg, _, err := image.DecodeConfig(f); err == nil {
						p.Width, p.Height = cfg.Width, cfg.Height
					}
				}
			}
		case HEIC, RAW:
			readEXIF(f, &p)
		}
		f.Close()
	}
	if p.TimeSource == "" {
		var packets [][]byte
		for _, s := range sidecars {
			if b, err := readSidecar(s); err == nil {
				packets = append(packets, b)
			}
		}
		p.TimeWithoutEXIF(path, modTime, packets)
	}
	return p
}

// TimeWithoutEXIF sets p's capture time as ProbeFile does for an original
// whose EXIF gives none: from the first of the sidecars' packets that
// has one, else a date in path's name, else modTime. It reads no file, so
// an asset whose sidecars changed gets its time again without its
// original being read.
func (p *Probe) TimeWithoutEXIF(path string, modTime time.Time, sidecars [][]byte) {
	for _, b := range sidecars {
		if t, offset, ok := XMPTime(b); ok {
			p.Taken, p.OffsetKnown, p.TimeSource = t, offset, SourceXMP
			return
		}
	}
	if t, ok := NameTime(path); ok {
		p.Taken, p.OffsetKnown, p.TimeSource = t, false, SourceFileName
		return
	}
	p.Taken, p.OffsetKnown, p.TimeSource = modTime, true, SourceFileTime
}

// maxSidecar bounds the bytes of a sidecar read: XMP packets are a few KiB.
const maxSidecar = 1 << 20

func readSidecar(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSidecar))
}

// readStillEXIF fills p from a still's EXIF: a JPEG's, read by
// readJPEGEXIF; the other stills Go decodes (PNG, GIF, WebP) rarely carry
// one and are probed from their name and time.
func readStillEXIF(r io.Reader, p *Probe) {
	x, ok := readJPEGEXIF(r)
	if !ok {
		return
	}
	if !x.taken.IsZero() {
		p.Taken, p.OffsetKnown, p.TimeSource = x.taken, x.offsetKnown, SourceEXIF
	}
	if x.orientation != 0 {
		p.Orientation = x.orientation
	}
	p.Width, p.Height = x.width, x.height
	if x.hasGPS && (x.lat != 0 || x.lon != 0) {
		p.HasLocation, p.Latitude, p.Longitude = true, x.lat, x.lon
	}
}

// errParserPanic is a metadata parser that panicked on a damaged or hostile
// file: the file is read as one without metadata.
var errParserPanic = errors.New("the metadata parser failed on this file")

// readEXIF fills p from r's EXIF, leaving p as it is when r has none or
// the parser fails on it.
func readEXIF(r io.ReadSeeker, p *Probe) {
	e, err := decodeEXIF(r)
	if err != nil {
		return
	}
	if t := e.DateTimeOriginal(); !t.IsZero() && t.Year() > 1900 {
		// A zone imagemeta made from OffsetTimeOriginal is a fixed zone
		// of its own; without one the wall clock is in time.UTC.
		p.Taken, p.OffsetKnown, p.TimeSource = t, t.Location() != time.UTC, SourceEXIF
	}
	if o := int(e.Orientation); o >= 1 && o <= 8 {
		p.Orientation = o
	}
	p.Width, p.Height = int(e.ImageWidth), int(e.ImageHeight)
	if lat, lon := e.GPS.Latitude(), e.GPS.Longitude(); (lat != 0 || lon != 0) && lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180 {
		p.HasLocation, p.Latitude, p.Longitude = true, lat, lon
	}
}

// decodeEXIF is imagemeta.Decode for the HEIC and RAW files the client
// cannot read itself, with a panic of the parser turned into an error and
// a bound on its time: a damaged file can send imagemeta into an endless
// loop (FuzzProbe found one in its JPEG reader). Past exifTimeout the file
// is probed without its EXIF; the loop, which cannot be stopped, ends with
// the process.
func decodeEXIF(r io.ReadSeeker) (exif2.Exif, error) {
	type result struct {
		e   exif2.Exif
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if recover() != nil {
				done <- result{err: errParserPanic}
			}
		}()
		e, err := imagemeta.Decode(r)
		done <- result{e, err}
	}()
	select {
	case res := <-done:
		return res.e, res.err
	case <-time.After(exifTimeout):
		return exif2.Exif{}, errParserStuck
	}
}

// exifTimeout bounds imagemeta's time on one file: a real one takes
// milliseconds.
const exifTimeout = 2 * time.Second

// errParserStuck is a file the metadata parser did not finish within
// exifTimeout.
var errParserStuck = errors.New("the metadata parser did not finish with this file")

// XMPTime is the capture time an XMP packet records: exif:DateTimeOriginal,
// else photoshop:DateCreated, else xmp:CreateDate, as an attribute or an
// element, and whether it carries its zone offset.
func XMPTime(packet []byte) (t time.Time, offsetKnown bool, ok bool) {
	found := map[string]string{}
	d := xml.NewDecoder(bytes.NewReader(packet))
	d.Strict = false
	var inside string
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch el := tok.(type) {
		case xml.StartElement:
			inside = el.Name.Local
			for _, a := range el.Attr {
				if _, wanted := xmpRank[a.Name.Local]; wanted && found[a.Name.Local] == "" {
					found[a.Name.Local] = a.Value
				}
			}
		case xml.CharData:
			if _, wanted := xmpRank[inside]; wanted && found[inside] == "" {
				found[inside] = strings.TrimSpace(string(el))
			}
		case xml.EndElement:
			inside = ""
		}
	}
	for _, name := range []string{"DateTimeOriginal", "DateCreated", "CreateDate"} {
		if v := found[name]; v != "" {
			if t, offset, ok := parseXMPDate(v); ok {
				return t, offset, true
			}
		}
	}
	return time.Time{}, false, false
}

var xmpRank = map[string]int{"DateTimeOriginal": 0, "DateCreated": 1, "CreateDate": 2}

// parseXMPDate reads XMP's ISO 8601 date forms: with or without seconds,
// fraction and zone.
func parseXMPDate(v string) (time.Time, bool, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true, true
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, false, true
		}
	}
	return time.Time{}, false, false
}

// nameDate finds a date and time in a file name as cameras, phones and
// messengers write them: IMG_20230714_180312, PXL_20230714_180312123,
// 2023-07-14 18.03.12, Screenshot 2023-07-14 at 18.03.12, and the date
// alone (IMG-20230714-WA0001).
var nameDate = regexp.MustCompile(`(?:^|[^0-9])((?:19|20)[0-9]{2})[-_.]?([01][0-9])[-_.]?([0-3][0-9])(?:(?:[-_ T.]|[ _]at[ _])([0-2][0-9])[-_.:h]?([0-5][0-9])[-_.:m]?([0-5][0-9]))?`)

// NameTime is the capture time a file's name gives, as a wall clock
// without a zone (read as UTC); a date alone is its midnight.
func NameTime(path string) (time.Time, bool) {
	name := path[strings.LastIndexAny(path, `/\`)+1:]
	m := nameDate.FindStringSubmatch(name)
	if m == nil {
		return time.Time{}, false
	}
	var y, mo, d, h, mi, s int
	fmt.Sscan(m[1], &y)
	fmt.Sscan(m[2], &mo)
	fmt.Sscan(m[3], &d)
	if m[4] != "" {
		fmt.Sscan(m[4], &h)
		fmt.Sscan(m[5], &mi)
		fmt.Sscan(m[6], &s)
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, 0, time.UTC)
	// time.Date normalises 2023-02-30 to March: such a name is no date.
	if t.Year() != y || int(t.Month()) != mo || t.Day() != d || t.Hour() != h || t.Minute() != mi {
		return time.Time{}, false
	}
	return t, true
}
