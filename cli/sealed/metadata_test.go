package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var testHash = strings.Repeat("ab", 32)

func testMetadata() *Metadata {
	off := -300
	alt := 12.5
	return &Metadata{
		Name: "IMG_1.heic", MediaType: "image/heic", Size: 123456,
		Taken:    &Taken{Local: "2026-01-02T03:04:05", OffsetMinutes: &off, Source: "xmp"},
		Location: &Location{Lat: -33.8568, Lon: 151.2153, Alt: &alt},
		Width:    4000, Height: 3000,
		Blobs:       map[Role]BlobRef{RoleOriginal: {testHash, 123456}, RoleThumbnail: {testHash, 5000}},
		ContentHMAC: testHash,
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	k := NewAssetKey()
	m := testMetadata()
	sealed, err := SealMetadata(k, m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenMetadata(k, sealed)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := EncodeMetadata(m)
	b, _ := EncodeMetadata(got)
	if !bytes.Equal(a, b) {
		t.Errorf("metadata changed through seal and open:\n%s\n%s", a, b)
	}
	if _, err := OpenMetadata(NewAssetKey(), sealed); !errors.Is(err, ErrAuth) {
		t.Errorf("metadata under another asset key: %v, want ErrAuth", err)
	}
}

// TestMetadataKeepsUnknownKeys: a rewrite by an older client carries along
// what a newer one wrote (FORMAT.md §6.1).
func TestMetadataKeepsUnknownKeys(t *testing.T) {
	doc := `{"blobs":{"original":{"hash":"` + testHash + `","size":1}},"content_hmac":"` + testHash + `","media_type":"a/b","name":"n","size":1,"v":1,"x-faces":[{"box":[1,2,3,4],"who":"ana"}],"zz":null}`
	m, err := ParseMetadata([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	m.Name = "renamed"
	out, err := EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(doc, `"name":"n"`, `"name":"renamed"`, 1)
	if got := string(bytes.TrimRight(out, " ")); got != want {
		t.Errorf("rewritten:\n%s\nwant\n%s", got, want)
	}
}

func TestPaddedSize(t *testing.T) {
	for _, c := range [][2]int{{0, 512}, {1, 512}, {512, 512}, {513, 1024}, {4097, 8192}, {65536, 65536}, {65537, 131072}, {200000, 262144}} {
		if got := paddedSize(c[0]); got != c[1] {
			t.Errorf("paddedSize(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

func TestMetadataRefusals(t *testing.T) {
	base := func(extra string) string {
		return `{"blobs":{"original":{"hash":"` + testHash + `","size":1}},"content_hmac":"` + testHash + `","media_type":"a/b","name":"n","size":1` + extra + `}`
	}
	for _, c := range []struct{ name, doc, want string }{
		{"no version", base(``), "no version"},
		{"version 2", base(`,"v":2`), "metadata format version 2 is not supported"},
		{"key twice", base(`,"v":1,"name":"m"`), "twice"},
		{"key twice inside", strings.Replace(base(`,"v":1`), `"size":1}`, `"size":1,"size":2}`, 1), "twice"},
		{"trailing data", base(`,"v":1`) + ` x`, "after the document"},
		{"trailing NUL", base(`,"v":1`) + "\x00", "after the document"},
		{"trailing newline", base(`,"v":1`) + "\n", "after the document"},
		{"trailing tab inside the padding", base(`,"v":1`) + "  \t  ", "after the document"},
		{"trailing carriage return", base(`,"v":1`) + "\r", "after the document"},
		{"null inside taken", base(`,"v":1,"taken":{"local":"2026-01-01T00:00:00","offset_minutes":null,"source":"exif"}`), "taken"},
		{"null inside location", base(`,"v":1,"location":{"alt":null,"lat":1,"lon":2}`), "location"},
		{"null width", base(`,"v":1,"width":null`), "width"},
		{"null blob reference", strings.Replace(base(`,"v":1`), `"size":1}}`, `"size":1},"preview":null}`, 1), "blobs"},
		{"not an object", `[1]`, "not a JSON object"},
		{"null name", strings.Replace(base(`,"v":1`), `"n"`, `null`, 1), "name"},
		{"fractional size", strings.Replace(base(`,"v":1`), `"size":1}`, `"size":1.5}`, 1), "blobs"},
		{"no original", strings.Replace(base(`,"v":1`), `"original"`, `"preview"`, 1), "no original"},
		{"metadata role", strings.Replace(base(`,"v":1`), `"original"`, `"metadata"`, 1), "no original"},
		{"uppercase hash", strings.Replace(base(`,"v":1`), `"content_hmac":"ab`, `"content_hmac":"AB`, 1), "content_hmac"},
		{"unknown source", base(`,"v":1,"taken":{"local":"2026-01-01T00:00:00","source":"guess"}`), "source"},
		{"local with a comma", base(`,"v":1,"taken":{"local":"2026-01-01T00:00:00,5","source":"exif"}`), "local"},
		{"local with an offset", base(`,"v":1,"taken":{"local":"2026-01-01T00:00:00Z","source":"exif"}`), "local"},
		{"unknown key in taken", base(`,"v":1,"taken":{"local":"2026-01-01T00:00:00","source":"exif","tz":"x"}`), "taken"},
		{"latitude out of range", base(`,"v":1,"location":{"lat":91,"lon":0}`), "location"},
		{"negative width", base(`,"v":1,"width":-1`), "negative"},
		{"companion without its blob", base(`,"v":1,"companion":{"content_hmac":"` + testHash + `","media_type":"video/quicktime","name":"a.mov","size":1}`), "companion"},
		{"companion blob without companion", strings.Replace(base(`,"v":1`), `"size":1}}`, `"size":1},"companion":{"hash":"`+testHash+`","size":1}}`, 1), "companion"},
		{"companion of another size", strings.Replace(base(`,"v":1,"companion":{"content_hmac":"`+testHash+`","media_type":"video/quicktime","name":"a.mov","size":2}`), `"size":1}}`, `"size":1},"companion":{"hash":"`+testHash+`","size":1}}`, 1), "companion"},
		{"companion named a path", strings.Replace(base(`,"v":1,"companion":{"content_hmac":"`+testHash+`","media_type":"video/quicktime","name":"../a.mov","size":1}`), `"size":1}}`, `"size":1},"companion":{"hash":"`+testHash+`","size":1}}`, 1), "companion"},
		{"companion with a null", strings.Replace(base(`,"v":1,"companion":{"content_hmac":"`+testHash+`","media_type":"video/quicktime","name":"a.mov","size":null}`), `"size":1}}`, `"size":1},"companion":{"hash":"`+testHash+`","size":0}}`, 1), "companion"},
		{"sidecar named a path", base(`,"v":1,"sidecars":[{"data":"","name":"x/a.xmp"}]`), "sidecars"},
		{"sidecar of null data", base(`,"v":1,"sidecars":[{"data":null,"name":"a.xmp"}]`), "sidecars"},
		{"sidecar not base64", base(`,"v":1,"sidecars":[{"data":"*","name":"a.xmp"}]`), "sidecars"},
		{"sidecar with an unknown key", base(`,"v":1,"sidecars":[{"data":"","name":"a.xmp","mode":1}]`), "sidecars"},
		{"sidecars over a MiB", base(`,"v":1,"sidecars":[{"data":"` + strings.Repeat("AAAA", MaxSidecars/3+1) + `","name":"a.xmp"}]`), "sidecars hold over"},
	} {
		_, err := ParseMetadata([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := ParseMetadata(bytes.Repeat([]byte(" "), MaxDocument+1)); err == nil {
		t.Error("a document over MaxDocument parsed")
	}
}

// TestMetadataErrorsQuoteNoPlaintext: refusals name the field, never the
// decrypted value, so an error logged by a client leaks nothing.
func TestMetadataErrorsQuoteNoPlaintext(t *testing.T) {
	base := `{"blobs":{"original":{"hash":"` + testHash + `","size":1}},"content_hmac":"` + testHash + `","media_type":"a/b","name":"n","size":1,"v":1`
	for _, doc := range []string{
		base + `,"taken":{"local":"SECRET","source":"exif"}}`,
		base + `,"taken":{"local":"2026-01-01T00:00:00","source":"SECRET"}}`,
		base + `,"taken":{"local":"2026-01-01T00:00:00","source":"exif","SECRET":1}}`,
		base + `,"SECRET":1,"SECRET":2}`,
		strings.Replace(base, `"original"`, `"SECRET"`, 1) + `}`,
		strings.Replace(base, `"size":1}}`, `"size":1},"SECRET":{"hash":"x","size":1}}`, 1) + `}`,
	} {
		_, err := ParseMetadata([]byte(doc))
		if err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: error %v", doc, err)
		}
	}
}
