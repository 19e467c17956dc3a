package sealed

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"time"
)

// Metadata is the plaintext of an asset's metadata blob (FORMAT.md §6). Keys
// a reader does not know are kept in Extra and written back on rewrite.
type Metadata struct {
	Name        string           // file name, UTF-8, without a directory
	MediaType   string           // MIME type, e.g. "image/jpeg"
	Size        int64            // plaintext size of the original, bytes
	Taken       *Taken           // capture time, when known
	Location    *Location        // where, when known
	Width       int64            // pixels, 0 when unknown
	Height      int64            // pixels, 0 when unknown
	DurationMS  int64            // milliseconds of audio or video, 0 when none
	Blobs       map[Role]BlobRef // the roles' blobs; "original" always present
	ContentHMAC string           // FORMAT.md §6.3, 64 lowercase hex
	// Companion is the asset's second original (a Live Photo's video, a
	// RAW+JPEG pair's raw file), whose blob is Blobs["companion"]; nil
	// for an asset of one original.
	Companion *Companion
	// Sidecars are the asset's XMP sidecar files, byte for byte.
	Sidecars []Sidecar
	Extra    map[string]json.RawMessage
}

// Companion names an asset's second original (FORMAT.md §6.1). Its fields
// are declared in the order of their keys, the canonical form's.
type Companion struct {
	ContentHMAC string `json:"content_hmac"` // FORMAT.md §6.3, of its bytes
	MediaType   string `json:"media_type"`
	Name        string `json:"name"`
	Size        int64  `json:"size"`
}

// Sidecar is a sidecar file that travels with its asset: its name and its
// bytes (standard base64 in the document).
type Sidecar struct {
	Data []byte `json:"data"`
	Name string `json:"name"`
}

// MaxSidecars is the most sidecar bytes, all together, an asset carries in
// its metadata (FORMAT.md §6.1): in base64 they stay well within a
// document's 4 MiB.
const MaxSidecars = 1 << 20

// Taken is a capture time as the camera or file recorded it: a local wall
// clock time, its UTC offset when known, and where it was read.
type Taken struct {
	Local         string `json:"local"`                    // "2006-01-02T15:04:05" with optional fraction
	OffsetMinutes *int   `json:"offset_minutes,omitempty"` // local minus UTC; nil when unknown
	Source        string `json:"source"`                   // "exif", "xmp", "filename" or "filetime"
}

// Location is a WGS 84 position.
type Location struct {
	Alt *float64 `json:"alt,omitempty"` // metres above the ellipsoid
	Lat float64  `json:"lat"`
	Lon float64  `json:"lon"`
}

// BlobRef names a role's blob: the content address of its sealed bytes and
// the size of its plaintext.
type BlobRef struct {
	Hash string `json:"hash"`
	Size int64  `json:"size"`
}

const localLayout = "2006-01-02T15:04:05.999999999"

var known = map[string]bool{"v": true, "name": true, "media_type": true, "size": true, "taken": true,
	"location": true, "width": true, "height": true, "duration_ms": true, "blobs": true, "content_hmac": true,
	"companion": true, "sidecars": true}

// EncodeMetadata returns the padded plaintext of m (FORMAT.md §6.1, §6.2).
func EncodeMetadata(m *Metadata) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	out := map[string]any{}
	for k, v := range m.Extra {
		if known[k] {
			return nil, malformed("metadata Extra holds the known key %q", k)
		}
		out[k] = v
	}
	out["v"] = 1
	out["name"] = m.Name
	out["media_type"] = m.MediaType
	out["size"] = m.Size
	if m.Taken != nil {
		out["taken"] = m.Taken
	}
	if m.Location != nil {
		out["location"] = m.Location
	}
	if m.Width != 0 {
		out["width"] = m.Width
	}
	if m.Height != 0 {
		out["height"] = m.Height
	}
	if m.DurationMS != 0 {
		out["duration_ms"] = m.DurationMS
	}
	out["blobs"] = m.Blobs
	out["content_hmac"] = m.ContentHMAC
	if m.Companion != nil {
		out["companion"] = m.Companion
	}
	if len(m.Sidecars) > 0 {
		sidecars := make([]Sidecar, len(m.Sidecars))
		for i, sc := range m.Sidecars {
			// An empty sidecar is "", never null.
			sidecars[i] = Sidecar{Data: append([]byte{}, sc.Data...), Name: sc.Name}
		}
		out["sidecars"] = sidecars
	}
	return encodeDocument(out)
}

// ParseMetadata reads the padded plaintext of a metadata blob. It is the
// parser of untrusted metadata that OpenMetadata runs.
func ParseMetadata(plain []byte) (*Metadata, error) {
	members, err := decodeDocument(plain)
	if err != nil {
		return nil, err
	}
	if err := version(members, "metadata"); err != nil {
		return nil, err
	}
	m := &Metadata{}
	fields := []struct {
		key      string
		dst      any
		required bool
	}{
		{"name", &m.Name, true},
		{"media_type", &m.MediaType, true},
		{"size", &m.Size, true},
		{"taken", &m.Taken, false},
		{"location", &m.Location, false},
		{"width", &m.Width, false},
		{"height", &m.Height, false},
		{"duration_ms", &m.DurationMS, false},
		{"blobs", &m.Blobs, true},
		{"content_hmac", &m.ContentHMAC, true},
		{"companion", &m.Companion, false},
		{"sidecars", &m.Sidecars, false},
	}
	for _, f := range fields {
		raw, ok := members[f.key]
		if !ok {
			if f.required {
				return nil, malformed("metadata has no %q", f.key)
			}
			continue
		}
		// The decoder's error is not wrapped: it could quote the plaintext.
		if err := strictUnmarshal(raw, f.dst); err != nil || hasNull(raw) {
			return nil, malformed("metadata %q is not of its type", f.key)
		}
	}
	for k, v := range members {
		if !known[k] {
			if m.Extra == nil {
				m.Extra = map[string]json.RawMessage{}
			}
			m.Extra[k] = v
		}
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// strictUnmarshal decodes one JSON value, refusing null, unknown keys in
// objects and a number with a fraction where an integer is wanted.
func strictUnmarshal(raw json.RawMessage, dst any) error {
	if bytes.Equal(raw, []byte("null")) {
		return malformed("null")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(dst)
}

// hasNull reports whether a JSON value holds a null anywhere: the decoder
// would read it as a zero value, and the format refuses null everywhere.
func hasNull(raw json.RawMessage) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	for {
		t, err := d.Token()
		if err != nil {
			return false
		}
		if t == nil {
			return true
		}
	}
}

func (m *Metadata) validate() error {
	if m.Size < 0 || m.Width < 0 || m.Height < 0 || m.DurationMS < 0 {
		return malformed("metadata size, width, height or duration_ms negative")
	}
	if t := m.Taken; t != nil {
		// time.Parse also takes a comma before the fraction; the format has a period only.
		if _, err := time.Parse(localLayout, t.Local); err != nil || strings.Contains(t.Local, ",") {
			return malformed("metadata taken.local is not a local date and time")
		}
		if t.OffsetMinutes != nil && (*t.OffsetMinutes < -1080 || *t.OffsetMinutes > 1080) {
			return malformed("metadata taken.offset_minutes out of range")
		}
		switch t.Source {
		case "exif", "xmp", "filename", "filetime":
		default:
			return malformed("metadata taken.source unknown")
		}
	}
	if l := m.Location; l != nil {
		if !(l.Lat >= -90 && l.Lat <= 90 && l.Lon >= -180 && l.Lon <= 180) ||
			l.Alt != nil && (math.IsNaN(*l.Alt) || math.IsInf(*l.Alt, 0)) {
			return malformed("metadata location out of range")
		}
	}
	if _, ok := m.Blobs[RoleOriginal]; !ok {
		return malformed("metadata blobs has no original")
	}
	ref, ok := m.Blobs[RoleCompanion]
	if c := m.Companion; c != nil {
		if !ok || ref.Size != c.Size || !isFileName(c.Name) || c.MediaType == "" || !isHash(c.ContentHMAC) {
			return malformed("metadata companion is not a file name, a media type, the size of blobs' companion and a content hash")
		}
	} else if ok {
		return malformed("metadata blobs has a companion and the metadata no companion")
	}
	var sidecarBytes int
	for _, sc := range m.Sidecars {
		if !isFileName(sc.Name) {
			return malformed("metadata sidecars has a name that is not a file name")
		}
		sidecarBytes += len(sc.Data)
	}
	if sidecarBytes > MaxSidecars {
		return malformed("metadata sidecars hold over %d bytes", MaxSidecars)
	}
	for r, b := range m.Blobs {
		if !r.valid() || r == RoleMetadata {
			return malformed("metadata blobs has a role other than original, companion, thumbnail, preview")
		}
		if !isHash(b.Hash) || b.Size < 0 {
			return malformed("metadata blobs has a reference that is not a hash and a size")
		}
	}
	if !isHash(m.ContentHMAC) {
		return malformed("metadata content_hmac is not 64 lowercase hex")
	}
	return nil
}

// isFileName reports whether s is one path element a reader can write a
// file under: not empty, not "." or "..", without "/", "\\" or NUL.
func isFileName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

// isHash reports whether s is 64 lowercase hex characters.
func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && s == string(bytes.ToLower([]byte(s)))
}

// SealMetadata seals m as the asset's metadata blob, under the asset's
// metadata role key.
func SealMetadata(k AssetKey, m *Metadata) ([]byte, error) {
	plain, err := EncodeMetadata(m)
	if err != nil {
		return nil, err
	}
	return sealBytes(k.BlobKey(RoleMetadata), plain, randomSalt()), nil
}

// OpenMetadata opens a metadata blob sealed by SealMetadata.
func OpenMetadata(k AssetKey, sealed []byte) (*Metadata, error) {
	plain, err := openBytes(k.BlobKey(RoleMetadata), sealed, MaxDocument)
	if err != nil {
		return nil, err
	}
	return ParseMetadata(plain)
}
