// Package media reads what the client learns from a photo or video file
// before sealing it: its kind, when it was taken and where, its size in
// pixels, and the thumbnail and preview shown before the original is
// fetched. Everything here reads files the user pointed the client at,
// which may be damaged or hostile: a parser's failure is an answer ("no
// capture time in the file"), never a crash.
package media

import (
	"path/filepath"
	"strings"
)

// Kind is what the client can do with a file.
type Kind int

const (
	// Other is not a photo or a video: not synced.
	Other Kind = iota
	// Image is a photo Go decodes (JPEG, PNG, GIF, WebP): it gets a
	// thumbnail and a preview.
	Image
	// HEIC, RAW and Video keep their originals; no thumbnail is made for
	// them (status says which assets have none).
	HEIC
	RAW
	Video
	// Sidecar is an XMP file that travels with the asset of its base name.
	Sidecar
)

func (k Kind) String() string {
	return [...]string{"other", "image", "heic", "raw", "video", "sidecar"}[k]
}

var kindByExt = map[string]Kind{
	".jpg": Image, ".jpeg": Image, ".png": Image, ".gif": Image, ".webp": Image,
	".heic": HEIC, ".heif": HEIC, ".avif": HEIC,
	".dng": RAW, ".cr2": RAW, ".cr3": RAW, ".nef": RAW, ".arw": RAW, ".orf": RAW, ".rw2": RAW, ".raf": RAW, ".pef": RAW, ".srw": RAW,
	".mov": Video, ".mp4": Video, ".m4v": Video, ".3gp": Video, ".avi": Video, ".mkv": Video, ".webm": Video, ".mts": Video,
	".xmp": Sidecar,
}

// KindOf is the kind of a file by its name's extension, case ignored.
func KindOf(name string) Kind {
	return kindByExt[strings.ToLower(filepath.Ext(name))]
}

// MediaType is the IANA media type of a file by its extension, as the
// metadata blob records it; "application/octet-stream" when unknown.
func MediaType(name string) string {
	if t, ok := mediaTypes[strings.ToLower(filepath.Ext(name))]; ok {
		return t
	}
	return "application/octet-stream"
}

var mediaTypes = map[string]string{
	".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".gif": "image/gif", ".webp": "image/webp",
	".heic": "image/heic", ".heif": "image/heif", ".avif": "image/avif",
	".dng": "image/x-adobe-dng", ".cr2": "image/x-canon-cr2", ".cr3": "image/x-canon-cr3", ".nef": "image/x-nikon-nef",
	".arw": "image/x-sony-arw", ".orf": "image/x-olympus-orf", ".rw2": "image/x-panasonic-rw2", ".raf": "image/x-fuji-raf",
	".pef": "image/x-pentax-pef", ".srw": "image/x-samsung-srw",
	".mov": "video/quicktime", ".mp4": "video/mp4", ".m4v": "video/x-m4v", ".3gp": "video/3gpp", ".avi": "video/x-msvideo",
	".mkv": "video/x-matroska", ".webm": "video/webm", ".mts": "video/mp2t",
	".xmp": "application/rdf+xml",
}
