// Package sharepage is the page that opens a share link in a browser: static
// HTML, CSS and JavaScript embedded in the binary, which decrypt the link's
// photos on the viewer's device with WebCrypto (cli/sealed/FORMAT.md §9).
// The server only serves these bytes (server/PROTOCOL.md §7.1); nothing
// here reads a file at run time.
package sharepage

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"path"
	"sort"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is the path below which the page's scripts, style sheet and
// service worker are served. The page links them relative to /s/ID.
const Prefix = "/share-page/"

// ServiceWorker is the name of the service worker's script. Its name stays
// the same from one build to the next, since a browser keeps a registered
// worker under its script's URL and checks that URL for updates.
const ServiceWorker = "sw.js"

// File is one file the page loads.
type File struct {
	Name        string // below Prefix
	ContentType string
	Body        []byte
	// Immutable files have their content's hash in their name, so a
	// browser may keep them as long as it likes.
	Immutable bool
}

var (
	page  []byte
	files = map[string]*File{}
)

// The page's files by extension: what they are served as.
var contentTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
}

func init() {
	// Each file's name gets its content's hash, and the files that load it
	// name it so: the modules first, then what imports them, then the page.
	renamed := map[string]string{}
	rename := func(b []byte) []byte {
		for name, hashed := range renamed {
			b = bytes.ReplaceAll(b, []byte("/"+name+`"`), []byte("/"+hashed+`"`))
		}
		return b
	}
	for _, name := range []string{"sealed.js", "reads.js", "app.js", "style.css"} {
		body := rename(mustRead(name))
		sum := sha256.Sum256(body)
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "-" + hex.EncodeToString(sum[:6]) + ext
		files[hashed] = &File{Name: hashed, ContentType: contentTypes[ext], Body: body, Immutable: true}
		renamed[name] = hashed
	}
	files[ServiceWorker] = &File{Name: ServiceWorker, ContentType: contentTypes[".js"], Body: rename(mustRead(ServiceWorker))}
	page = rename(mustRead("index.html"))
}

func mustRead(name string) []byte {
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		panic(err)
	}
	return b
}

// Page is the HTML of the page, the same for every link: the link's id is
// in its URL's path and its secret in the fragment, which the page reads.
func Page() []byte { return page }

// Lookup returns the file of that name below Prefix.
func Lookup(name string) (*File, bool) {
	f, ok := files[name]
	return f, ok
}

// Files lists every file the page loads, in name order.
func Files() []*File {
	out := make([]*File, 0, len(files))
	for _, f := range files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
