package media_test

import (
	"bytes"
	"image"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"sealbox/cli/media"
	"sealbox/cli/media/mediatest"
)

func TestGroupFiles(t *testing.T) {
	got := media.GroupFiles([]string{
		"IMG_0001.HEIC", "IMG_0001.MOV", // a Live Photo
		"DSC_0002.NEF", "DSC_0002.JPG", "DSC_0002.xmp", // RAW+JPEG and its sidecar
		"IMG_0003.jpg", "IMG_0003.jpg.xmp", // darktable's sidecar name
		"clip.mp4", "notes.txt", "orphan.xmp",
		"twice.jpg", "twice.png", // one base, two stills: two assets
	})
	want := []media.Group{
		{Originals: []string{"DSC_0002.JPG", "DSC_0002.NEF"}, Sidecars: []string{"DSC_0002.xmp"}},
		{Originals: []string{"IMG_0001.HEIC", "IMG_0001.MOV"}},
		{Originals: []string{"IMG_0003.jpg"}, Sidecars: []string{"IMG_0003.jpg.xmp"}},
		{Originals: []string{"clip.mp4"}},
		{Originals: []string{"twice.jpg"}},
		{Originals: []string{"twice.png"}},
	}
	if !slices.EqualFunc(got, want, func(a, b media.Group) bool {
		return slices.Equal(a.Originals, b.Originals) && slices.Equal(a.Sidecars, b.Sidecars)
	}) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestNameTime(t *testing.T) {
	for name, want := range map[string]string{
		"IMG_20230714_180312.jpg":                   "2023-07-14T18:03:12Z",
		"PXL_20230714_180312123.jpg":                "2023-07-14T18:03:12Z",
		"2023-07-14 18.03.12.jpg":                   "2023-07-14T18:03:12Z",
		"Screenshot 2023-07-14 at 18.03.12.png":     "2023-07-14T18:03:12Z",
		"IMG-20230714-WA0001.jpg":                   "2023-07-14T00:00:00Z",
		"/photos/2019/VID_20190101_000000.mp4":      "2019-01-01T00:00:00Z",
		"IMG_20230230_120000.jpg (not a real date)": "",
		"IMG_1234.jpg":                              "",
		"holiday.jpg":                               "",
	} {
		got, ok := media.NameTime(name)
		if (want == "") == ok || (ok && got.Format(time.RFC3339) != want) {
			t.Errorf("%s: got %v %v, want %q", name, got, ok, want)
		}
	}
}

func TestXMPTime(t *testing.T) {
	for packet, want := range map[string]string{
		`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:DateTimeOriginal="2021-05-06T07:08:09+02:00"/></rdf:RDF></x:xmpmeta>`: "2021-05-06T07:08:09+02:00 true",
		`<rdf:Description xmlns:photoshop="http://ns.adobe.com/photoshop/1.0/"><photoshop:DateCreated>2021-05-06T07:08:09</photoshop:DateCreated></rdf:Description>`:                                                                                 "2021-05-06T07:08:09Z false",
		`<d xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmlns:exif="http://ns.adobe.com/exif/1.0/" xmp:CreateDate="2020-01-01T00:00:00Z"><exif:DateTimeOriginal>2021-05-06T07:08:09.5-03:00</exif:DateTimeOriginal></d>`:                                "2021-05-06T07:08:09-03:00 true",
		`<d>no dates</d>`: "",
		`not xml at all`:  "",
	} {
		got, offset, ok := media.XMPTime([]byte(packet))
		s := ""
		if ok {
			s = got.Truncate(time.Second).Format(time.RFC3339) + " " + map[bool]string{true: "true", false: "false"}[offset]
		}
		if s != want {
			t.Errorf("%.60s: got %q, want %q", packet, s, want)
		}
	}
}

// TestProbeFile: the capture time comes from EXIF with its offset, else a
// sidecar's XMP, else the file's name, else its time; orientation, size and
// location come from the photo.
func TestProbeFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	modTime := time.Date(2024, 1, 2, 3, 4, 5, 0, time.Local)
	withEXIF := write("IMG_20990101_000000.jpg", mediatest.JPEG(40, 30, 1, mediatest.EXIF{
		DateTimeOriginal: "2023:07:14 18:03:12", Offset: "+02:00", Orientation: 6,
		Latitude: 48.8566, Longitude: -2.3522, HasLocation: true,
	}))
	p := media.ProbeFile(withEXIF, modTime, nil)
	if p.TimeSource != media.SourceEXIF || !p.OffsetKnown || p.Taken.Format(time.RFC3339) != "2023-07-14T18:03:12+02:00" {
		t.Fatalf("EXIF time: %+v", p)
	}
	if p.Orientation != 6 || p.Width != 40 || p.Height != 30 || !p.HasLocation ||
		p.Latitude < 48.85 || p.Latitude > 48.86 || p.Longitude > -2.35 || p.Longitude < -2.36 {
		t.Fatalf("EXIF orientation, size and location: %+v", p)
	}
	noZone := write("no-zone.jpg", mediatest.JPEG(8, 8, 2, mediatest.EXIF{DateTimeOriginal: "2022:12:31 23:59:58"}))
	if p := media.ProbeFile(noZone, modTime, nil); p.TimeSource != media.SourceEXIF || p.OffsetKnown || p.Taken.Format(time.RFC3339) != "2022-12-31T23:59:58Z" {
		t.Fatalf("EXIF time without a zone: %+v", p)
	}
	plain := write("IMG_20200202_020202.jpg", mediatest.JPEG(8, 8, 3, mediatest.EXIF{Description: "no time"}))
	sidecar := write("IMG_20200202_020202.xmp", []byte(`<d xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:DateTimeOriginal="2021-05-06T07:08:09+02:00"/>`))
	if p := media.ProbeFile(plain, modTime, []string{sidecar}); p.TimeSource != media.SourceXMP || p.Taken.Format(time.RFC3339) != "2021-05-06T07:08:09+02:00" {
		t.Fatalf("sidecar time: %+v", p)
	}
	if p := media.ProbeFile(plain, modTime, nil); p.TimeSource != media.SourceFileName || p.OffsetKnown || p.Taken.Format(time.RFC3339) != "2020-02-02T02:02:02Z" {
		t.Fatalf("file name time: %+v", p)
	}
	video := write("clip.mp4", []byte("not really a video"))
	if p := media.ProbeFile(video, modTime, nil); p.TimeSource != media.SourceFileTime || !p.Taken.Equal(modTime) || p.Orientation != 1 {
		t.Fatalf("file time: %+v", p)
	}
	damaged := write("damaged.jpg", []byte("\xff\xd8\xff\xe1\x00\x10Exif\x00\x00MM\x00\x2a\xff\xff\xff\xff"))
	if p := media.ProbeFile(damaged, modTime, nil); p.TimeSource != media.SourceFileTime {
		t.Fatalf("a damaged file: %+v", p)
	}
}

// TestRenditions: a landscape photo whose camera was turned (orientation 6)
// becomes an upright preview at most 2048 pixels and a thumbnail at most
// 512, both JPEG; a small photo is not enlarged.
func TestRenditions(t *testing.T) {
	photo := mediatest.JPEG(3000, 1000, 4, mediatest.EXIF{Orientation: 6})
	thumb, preview, err := media.Renditions(bytes.NewReader(photo), 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		b    []byte
		w, h int
	}{{preview, 682, 2048}, {thumb, 170, 512}} {
		cfg, format, err := image.DecodeConfig(bytes.NewReader(tc.b))
		if err != nil || format != "jpeg" || cfg.Width != tc.w || cfg.Height != tc.h {
			t.Fatalf("rendition: %s %dx%d, %v; want jpeg %dx%d", format, cfg.Width, cfg.Height, err, tc.w, tc.h)
		}
	}
	small := mediatest.JPEG(300, 200, 5, mediatest.EXIF{})
	thumb, _, err = media.Renditions(bytes.NewReader(small), 1)
	if cfg, _, _ := image.DecodeConfig(bytes.NewReader(thumb)); err != nil || cfg.Width != 300 || cfg.Height != 200 {
		t.Fatalf("a small photo: %dx%d, %v", cfg.Width, cfg.Height, err)
	}
	if _, _, err := media.Renditions(bytes.NewReader([]byte("not an image")), 1); err == nil {
		t.Fatal("a file that is no image has renditions")
	}
}

// FuzzProbe: whatever bytes a photo file holds, probing it neither panics
// nor invents a capture time before 1900, and a sidecar or a name that is
// not a date is no capture time.
func FuzzProbe(f *testing.F) {
	f.Add(mediatest.JPEG(4, 4, 1, mediatest.EXIF{DateTimeOriginal: "2023:07:14 18:03:12", Offset: "+02:00", Orientation: 6, HasLocation: true, Latitude: 1, Longitude: 2}), "<d/>")
	f.Add([]byte("\xff\xd8\xff\xe1\x00\x10Exif\x00\x00MM\x00\x2a"), `<d xmlns:exif="e" exif:DateTimeOriginal="2021-05-06T07:08:09+02:00"/>`)
	f.Add([]byte("II*\x00\x08\x00\x00\x00"), "")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, photo []byte, xmp string) {
		path := filepath.Join(dir, "fuzz.jpg")
		if err := os.WriteFile(path, photo, 0o600); err != nil {
			t.Fatal(err)
		}
		side := filepath.Join(dir, "fuzz.xmp")
		if err := os.WriteFile(side, []byte(xmp), 0o600); err != nil {
			t.Fatal(err)
		}
		modTime := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		p := media.ProbeFile(path, modTime, []string{side})
		if p.TimeSource == media.SourceEXIF && p.Taken.Year() <= 1900 {
			t.Fatalf("an EXIF time of %v", p.Taken)
		}
		if p.Orientation < 1 || p.Orientation > 8 {
			t.Fatalf("orientation %d", p.Orientation)
		}
		media.NameTime(xmp)
	})
}
