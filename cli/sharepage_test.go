package cli

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/rs/zerolog"

	"sealbox/cli/media/mediatest"
	"sealbox/server"
)

// viewerProxy stands between the browser and sealbox: it keeps every
// request the browser made (line and headers) and counts the bytes each
// path was sent.
type viewerProxy struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	sent     map[string]int64
}

func newViewerProxy(t *testing.T, target string) *viewerProxy {
	t.Helper()
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	p := &viewerProxy{sent: map[string]int64{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var head strings.Builder
		r.Header.Write(&head)
		cw := &countingWriter{ResponseWriter: w}
		proxy.ServeHTTP(cw, r)
		p.mu.Lock()
		p.requests = append(p.requests, r.Method+" "+r.URL.String()+"\n"+head.String())
		p.sent[r.URL.Path] += cw.n
		p.mu.Unlock()
	}))
	t.Cleanup(p.Close)
	return p
}

// blobBytes is how many bytes the blob reads were sent so far.
// settledBlobBytes is blobBytes once no blob byte has been sent for 300 ms
// (or after 10 s): reads the player started before a measurement (its
// read-ahead) are over when the measurement's window opens.
func (p *viewerProxy) settledBlobBytes() int64 {
	last, quietSince, deadline := p.blobBytes(), time.Now(), time.Now().Add(10*time.Second)
	for time.Since(quietSince) < 300*time.Millisecond && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		if n := p.blobBytes(); n != last {
			last, quietSince = n, time.Now()
		}
	}
	return last
}

func (p *viewerProxy) blobBytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for path, sent := range p.sent {
		if strings.Contains(path, "/blob/") {
			n += sent
		}
	}
	return n
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// tile is what the test reads of one thumbnail of the grid.
type tile struct {
	Name     string `json:"name"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	Complete bool   `json:"complete"`
	Label    string `json:"label"`
	Badge    string `json:"badge"`
}

// The video of TestSharePageInABrowser, a WebM the browser encodes, and
// how long it lasts.
const (
	video        = "clip.webm"
	videoSeconds = 30
)

// TestSharePageInABrowser opens links made by the real `sealbox client`
// in headless Chromium, driven over the DevTools protocol. A folder of 100
// JPEGs, a PNG, a video and a Live Photo (a still and a video of one name)
// is synced and shared: the grid shows its first thumbnail within 1 s
// and every thumbnail decoded at its size, named by its file, a "LIVE"
// badge on the Live Photos alone; the full view shows the preview and the
// capture date and moves with the keys; an
// original downloads under its name with the source's SHA-256; "download
// all" is a ZIP whose files are the folder's, byte for byte. The video (a
// WebM of 30 s the browser encoded) shows its first frame, seeks to its
// middle having read less than the whole sealed blob, and plays on from
// there; a range of it, read through the page's service worker, is the
// source's bytes and costs the server a few chunks. A Live Photo's video,
// opened from the keyboard with the full view's LIVE control, is its
// companion's bytes: a WebM plays, and a QuickTime file Chromium cannot
// play is said to be unplayable and downloads under its name; a photo
// without a video companion (a RAW+JPEG pair's included) has no such
// control. A passphrase link asks,
// says a wrong passphrase is wrong and opens with the right one; a revoked,
// an expired and an unknown link say the same "no longer available"; a link
// without its fragment, cut short or changed says it is incomplete. No
// request the browser made, no request the client made and no line of the
// server's log holds any part of a fragment or the passphrase. Labels, alt
// text and the keyboard's focus order are checked on the way.
func TestSharePageInABrowser(t *testing.T) {
	chromium := findChromium(t)
	logs := &syncBuffer{}
	// The test's clock stands still, so the share-read bucket never
	// refills: its burst covers every read of the test.
	rig := newClientRig(t, func(c *server.Config) { c.Log = zerolog.New(logs); c.ShareBurst = 100_000 })
	const album = "Holiday in Lyon"
	folder := filepath.Join(t.TempDir(), album)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, chromium)
	files := map[string][]byte{}
	size := map[string][2]int{}
	for i := 1; i <= 100; i++ {
		name := fmt.Sprintf("IMG_%04d.jpg", i)
		w, h := 320, 240
		if i%4 == 0 {
			w, h = 180, 320
		}
		files[name] = mediatest.JPEG(w, h, byte(i), mediatest.EXIF{DateTimeOriginal: fmt.Sprintf("2023:07:%02d 18:03:12", 1+i%28), Offset: "+02:00"})
		size[name] = [2]int{w, h}
	}
	files["scan.png"] = mediatest.PNG(300, 200)
	size["scan.png"] = [2]int{300, 200}
	files["LIVE_0001.jpg"] = mediatest.JPEG(240, 320, 201, mediatest.EXIF{DateTimeOriginal: "2024:01:02 09:10:11"})
	size["LIVE_0001.jpg"] = [2]int{240, 320}
	files["LIVE_0001.mov"] = noise(300_000)
	files["LIVE_0002.jpg"] = mediatest.JPEG(240, 320, 202, mediatest.EXIF{DateTimeOriginal: "2024:01:03 09:10:11"})
	size["LIVE_0002.jpg"] = [2]int{240, 320}
	files["LIVE_0002.webm"] = browserVideo(t, ctx, 160, 120, 15, 2, 200_000)
	files["PAIR_0001.jpg"] = mediatest.JPEG(320, 240, 203, mediatest.EXIF{DateTimeOriginal: "2024:01:04 09:10:11"})
	size["PAIR_0001.jpg"] = [2]int{320, 240}
	files["PAIR_0001.cr2"] = noise(50_000)
	files["broken.mov"] = noise(100_000) // a video no browser plays
	companions := []string{"LIVE_0001.mov", "LIVE_0002.webm", "PAIR_0001.cr2"}
	files[video] = browserVideo(t, ctx, 320, 240, 15, videoSeconds, 8_000_000)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(folder, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "viewer@example.org", "--password-stdin")
	out := rig.mustRun(0, "", "sync", folder, "--json")
	// A Live Photo's still and video are one asset (one tile, one
	// upload), its video the companion original; a RAW+JPEG pair too.
	if ev := events(t, out); len(ev["uploaded"]) != len(files)-len(companions) {
		t.Fatalf("sync: %s", out)
	}
	const passphrase = "a long passphrase"
	link := strings.TrimSpace(rig.mustRun(0, "", "share", album))
	guarded := strings.TrimSpace(rig.mustRun(0, passphrase+"\n", "share", "IMG_0001.jpg", "--passphrase-stdin"))
	single := strings.TrimSpace(rig.mustRun(0, "", "share", "scan.png"))
	expiring := strings.TrimSpace(rig.mustRun(0, "", "share", "IMG_0002.jpg", "--expires", "24h"))

	front := newViewerProxy(t, rig.url)
	open := func(link string) string { return strings.Replace(link, rig.url, front.URL, 1) }
	downloads := t.TempDir()
	browserDo(t, ctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads, EventsEnabled: new(true)})
		return err
	}))
	chromedp.ListenBrowser(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *browser.EventDownloadWillBegin:
			t.Logf("download of %s begins", ev.SuggestedFilename)
		case *browser.EventDownloadProgress:
			if ev.State != browser.DownloadProgressStateInProgress {
				t.Logf("download %s: %s, %.0f bytes", ev.GUID, ev.State, ev.ReceivedBytes)
			}
		}
	})

	// The gallery: the first thumbnail in under a second, every one
	// decoded at its size, each named by its file.
	browserDo(t, ctx, chromedp.Navigate(open(link)), pageUntil(`document.body.dataset.loaded === "true"`))
	first := pageEval[float64](t, ctx, `performance.getEntriesByName("first-thumbnail")[0].startTime`)
	t.Logf("first thumbnail shown %.0f ms after the navigation started (%d assets)", first, len(files))
	if first <= 0 || first > 1000 {
		t.Errorf("the first thumbnail took %.0f ms, want under 1 s", first)
	}
	if got := pageEval[string](t, ctx, `document.querySelector("h1").textContent`); got != album {
		t.Errorf("title: got %q, want %q", got, album)
	}
	tiles := pageEval[[]tile](t, ctx, `[...document.querySelectorAll("#grid button")].map((b) => {
		const img = b.querySelector("img");
		return { name: img ? img.alt : b.textContent, width: img ? img.naturalWidth : 0, height: img ? img.naturalHeight : 0,
			complete: img ? img.complete : false, label: b.getAttribute("aria-label") || "",
			badge: b.querySelector(".live") ? b.querySelector(".live").textContent : "" };
	})`)
	names := map[string]bool{}
	for _, tl := range tiles {
		names[tl.Name] = true
		if tl.Label != "" {
			t.Errorf("tile %q is labelled %q, not by its file's name", tl.Name, tl.Label)
		}
		if live := strings.HasPrefix(tl.Name, "LIVE_"); live != (tl.Badge == "LIVE") {
			t.Errorf("tile %q: badge %q, want one exactly on a Live Photo", tl.Name, tl.Badge)
		}
		want, still := size[tl.Name]
		if still && (!tl.Complete || tl.Width != want[0] || tl.Height != want[1]) {
			t.Errorf("thumbnail of %s: %+v, want decoded at %dx%d", tl.Name, tl, want[0], want[1])
		}
	}
	tilesWanted := mapKeys(files)
	for _, c := range companions {
		delete(tilesWanted, c)
	}
	if !maps.Equal(names, tilesWanted) {
		t.Errorf("the grid shows %v, want %v", slices.Sorted(maps.Keys(names)), slices.Sorted(maps.Keys(tilesWanted)))
	}

	// Accessibility: every image has its alt text, every button a name,
	// no focus order of its own; Tab goes "Download all", then the grid
	// in order; Enter opens a photo, Escape gives the focus back.
	if bad := pageEval[[]string](t, ctx, `[...document.querySelectorAll("button, img, input, [tabindex]")].filter((e) =>
		(e.tabIndex > 0) || (e.tagName === "IMG" && e.closest("#grid") && !e.alt) ||
		(e.tagName === "BUTTON" && !e.hidden && !(e.getAttribute("aria-label") || e.textContent.trim() || e.querySelector("img[alt]:not([alt=''])")))
	).map((e) => e.outerHTML.slice(0, 80))`); len(bad) != 0 {
		t.Errorf("elements without a name or with a focus order of their own: %q", bad)
	}
	focused := func() string {
		return pageEval[string](t, ctx, `(() => { const e = document.activeElement; const img = e.querySelector("img");
			return e.id || (img ? img.alt : e.textContent); })()`)
	}
	browserDo(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`), chromedp.KeyEvent(kb.Tab))
	if got := focused(); got != "all" {
		t.Errorf("first Tab: focus on %q, want the Download all button", got)
	}
	browserDo(t, ctx, chromedp.KeyEvent(kb.Tab))
	if got := focused(); got != tiles[0].Name {
		t.Errorf("second Tab: focus on %q, want the first photo %q", got, tiles[0].Name)
	}
	browserDo(t, ctx, chromedp.KeyEvent(kb.Tab))
	if got := focused(); got != tiles[1].Name {
		t.Errorf("third Tab: focus on %q, want the second photo %q", got, tiles[1].Name)
	}

	// The full view, opened from the keyboard: the preview, the name and
	// the capture date; the arrow keys move, Escape closes and the focus
	// goes back to the photo.
	const photo = "IMG_0012.jpg"
	k := slices.IndexFunc(tiles, func(tl tile) bool { return tl.Name == photo })
	browserDo(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelectorAll("#grid button")[%d].focus()`, k)), chromedp.KeyEvent(kb.Enter),
		pageUntil(`document.querySelector("#viewer").open && document.querySelector("#full").dataset.shown === "preview" &&
		document.querySelector("#full").complete && document.querySelector("#full").naturalWidth > 0`))
	view := pageEval[map[string]any](t, ctx, `({ name: document.querySelector("#name").textContent, time: document.querySelector("#taken").dateTime,
		text: document.querySelector("#taken").textContent, width: document.querySelector("#full").naturalWidth, alt: document.querySelector("#full").alt,
		src: document.querySelector("#full").src, live: !document.querySelector("#live").hidden })`)
	if view["name"] != photo || view["alt"] != photo || view["width"] != float64(size[photo][0]) || !strings.HasPrefix(view["src"].(string), "blob:") ||
		view["live"] != false {
		t.Errorf("full view of %s: %v", photo, view)
	}
	if tm, _ := view["time"].(string); tm != "2023-07-13T18:03:12+02:00" || !strings.Contains(view["text"].(string), "2023") {
		t.Errorf("capture date of %s: %v, want 2023-07-13T18:03:12+02:00", photo, view)
	}
	forth, back, next := kb.ArrowRight, kb.ArrowLeft, k+1
	if k == len(tiles)-1 {
		forth, back, next = kb.ArrowLeft, kb.ArrowRight, k-1
	}
	browserDo(t, ctx, chromedp.KeyEvent(forth), pageUntil(fmt.Sprintf(`document.querySelector("#name").textContent === %q`, tiles[next].Name)),
		chromedp.KeyEvent(back), pageUntil(fmt.Sprintf(`document.querySelector("#name").textContent === %q`, photo)),
		chromedp.KeyEvent(kb.Escape), pageUntil(viewerClosed))
	if got := focused(); got != photo {
		t.Errorf("after Escape: focus on %q, want the photo that was open, %q", got, photo)
	}

	// An original downloads decrypted, under its own name.
	openTile := func(name string) {
		t.Helper()
		browserDo(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`[...document.querySelectorAll("#grid button")].find((b) =>
			(b.querySelector("img") ? b.querySelector("img").alt : b.textContent) === %q).click()`, name)),
			pageUntil(fmt.Sprintf(`document.querySelector("#viewer").open && document.querySelector("#name").textContent === %q`, name)))
	}
	openTile("IMG_0042.jpg")
	browserDo(t, ctx, chromedp.Click("#download"))
	if got := waitFile(t, ctx, filepath.Join(downloads, "IMG_0042.jpg")); hashHex(got) != hashHex(files["IMG_0042.jpg"]) {
		t.Errorf("downloaded IMG_0042.jpg: SHA-256 %s, want the source's %s", hashHex(got), hashHex(files["IMG_0042.jpg"]))
	}

	// The video: it starts, a seek to its middle moves currentTime and
	// reads the sealed blob around it, not the whole blob, and it plays
	// from there. The service worker answers the player's ranges.
	before := front.settledBlobBytes()
	start := pageEval[float64](t, ctx, fmt.Sprintf(`new Promise((resolve) => {
		const v = document.querySelector("#video");
		const t0 = performance.now();
		v.addEventListener("loadeddata", () => resolve(performance.now() - t0), { once: true });
		[...document.querySelectorAll("#grid button")].find((b) => b.textContent === %q).click();
	})`, video))
	seek := pageEval[map[string]float64](t, ctx, `(async () => {
		const v = document.querySelector("#video");
		const duration = v.duration;
		v.currentTime = duration / 2;
		await new Promise((r) => v.addEventListener("seeked", r, { once: true }));
		return { duration, time: v.currentTime };
	})()`)
	seekSpent := front.blobBytes() - before
	sealedVideo := int64(len(files[video])) + 25 + 16*int64((len(files[video])+65535)/65536)
	t.Logf("the %d-byte video showed its first frame %.0f ms after its tile was clicked; a seek to %.1f s of %.1f s had read %d bytes of blobs",
		len(files[video]), start, seek["time"], seek["duration"], seekSpent)
	if math.Abs(seek["duration"]-videoSeconds) > 0.5 || math.Abs(seek["time"]-videoSeconds/2) > 0.5 {
		t.Errorf("the video's seek: %v, want to %d s of %d s", seek, videoSeconds/2, videoSeconds)
	}
	if seekSpent >= sealedVideo {
		t.Errorf("opening the video and seeking to its middle read %d bytes of blobs; the sealed video is %d", seekSpent, sealedVideo)
	}
	played := pageEval[float64](t, ctx, `(async () => {
		const v = document.querySelector("#video");
		const from = v.currentTime;
		v.muted = true;
		await v.play();
		while (v.currentTime < from + 0.5) await new Promise((r) => v.addEventListener("timeupdate", r, { once: true }));
		v.pause();
		return v.currentTime;
	})()`)
	if played < seek["time"]+0.5 {
		t.Errorf("the video did not play on from its middle: at %.2f s", played)
	}
	src := pageEval[string](t, ctx, `document.querySelector("#video").src`)
	browserDo(t, ctx, chromedp.KeyEvent(kb.Escape), pageUntil(viewerClosed))

	// A range read through the worker, the player gone (and its reads
	// ended): the source's bytes, for a few chunks of the sealed blob.
	before = front.settledBlobBytes()
	const from, to = 6<<20 + 12345, 6<<20 + 300_000
	got := pageEval[string](t, ctx, fmt.Sprintf(`fetch(%q, { headers: { Range: "bytes=%d-%d" } }).then(async (r) =>
		r.status + " " + r.headers.get("Content-Range") + " " + [...new Uint8Array(await crypto.subtle.digest("SHA-256", await r.arrayBuffer()))].map((b) => b.toString(16).padStart(2, "0")).join(""))`, src, from, to-1))
	if want := fmt.Sprintf("206 bytes %d-%d/%d %s", from, to-1, len(files[video]), hashHex(files[video][from:to])); got != want {
		t.Errorf("a range of the video: got %q, want %q", got, want)
	}
	if spent := front.blobBytes() - before; spent > 6*65552 {
		t.Errorf("a range of %d bytes cost the server %d bytes of blobs", to-from, spent)
	}

	// A Live Photo: its LIVE control, reached from the keyboard, opens its
	// video, whose source the page reads as the companion's bytes. A WebM
	// plays; a QuickTime file (here not even a video) Chromium cannot
	// play, and the page says so, shows the still again and offers the
	// file under its name.
	openTile("PAIR_0001.jpg")
	if pageEval[bool](t, ctx, `!document.querySelector("#live").hidden`) {
		t.Error("a RAW+JPEG pair shows the LIVE control: its companion is no video")
	}
	// The source's kind first: "video", the service worker's stream.
	videoSHA256 := `fetch(document.querySelector("#video").src).then(async (r) => new URL(r.url).pathname.split("/")[3] + " " + r.status + " " + r.headers.get("Content-Type") + " " +
		[...new Uint8Array(await crypto.subtle.digest("SHA-256", await r.arrayBuffer()))].map((b) => b.toString(16).padStart(2, "0")).join(""))`
	playLive := func(name string) {
		t.Helper()
		openTile(name)
		control := pageEval[map[string]any](t, ctx, `(() => { const b = document.querySelector("#live"); b.focus();
			return { shown: !b.hidden, focused: document.activeElement === b, label: b.getAttribute("aria-label"), text: b.textContent }; })()`)
		if control["shown"] != true || control["focused"] != true || !strings.Contains(fmt.Sprint(control["label"]), "video") || !strings.Contains(fmt.Sprint(control["text"]), "LIVE") {
			t.Errorf("the LIVE control of %s: %v, want it shown, focusable and labelled", name, control)
		}
		browserDo(t, ctx, chromedp.KeyEvent(kb.Enter), pageUntil(`document.querySelector("#video").getAttribute("src")`))
	}
	playLive("LIVE_0002.jpg")
	browserDo(t, ctx, pageUntil(`document.querySelector("#video").currentTime > 0.5`))
	if got, want := pageEval[string](t, ctx, videoSHA256), "video 200 video/webm "+hashHex(files["LIVE_0002.webm"]); got != want {
		t.Errorf("the Live Photo's WebM video: got %q, want %q", got, want)
	}
	if note := pageEval[string](t, ctx, `document.querySelector("#live-note").textContent`); note != "" {
		t.Errorf("the Live Photo's WebM video played, and the page says %q", note)
	}
	playLive("LIVE_0001.jpg")
	browserDo(t, ctx, pageUntil(`!document.querySelector("#live-download").hidden`))
	if got, want := pageEval[string](t, ctx, videoSHA256), "video 200 video/quicktime "+hashHex(files["LIVE_0001.mov"]); got != want {
		t.Errorf("the Live Photo's QuickTime video: got %q, want %q", got, want)
	}
	unplayable := pageEval[map[string]any](t, ctx, `({ note: document.querySelector("#live-note").textContent, button: document.querySelector("#live-download").textContent,
		still: !document.querySelector("#full").hidden, video: !document.querySelector("#video").hidden })`)
	if !strings.Contains(fmt.Sprint(unplayable["note"]), "cannot play") || !strings.Contains(fmt.Sprint(unplayable["note"]), "video/quicktime") ||
		unplayable["button"] != "Download LIVE_0001.mov" || unplayable["still"] != true || unplayable["video"] != false {
		t.Errorf("a Live Photo video Chromium cannot play: %v, want it said, the still shown and the file offered", unplayable)
	}
	browserDo(t, ctx, chromedp.Click("#live-download"))
	if got := waitFile(t, ctx, filepath.Join(downloads, "LIVE_0001.mov")); hashHex(got) != hashHex(files["LIVE_0001.mov"]) {
		t.Errorf("downloaded LIVE_0001.mov: SHA-256 %s, want the source's %s", hashHex(got), hashHex(files["LIVE_0001.mov"]))
	}
	browserDo(t, ctx, chromedp.KeyEvent(kb.Escape), pageUntil(viewerClosed))

	// Download all: one ZIP, streamed, whose files are the folder's.
	browserDo(t, ctx, chromedp.Click("#all"))
	archive := waitFile(t, ctx, filepath.Join(downloads, album+".zip"))
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatalf("download all: %v", err)
	}
	inZip := map[string]bool{}
	for _, f := range zr.File {
		r, err := f.Open()
		if err != nil {
			t.Fatalf("%s in the archive: %v", f.Name, err)
		}
		b, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(b, files[f.Name]) || f.Method != zip.Store {
			t.Errorf("%s in the archive: %v, %d bytes, method %d; want the folder's %d bytes stored", f.Name, err, len(b), f.Method, len(files[f.Name]))
		}
		inZip[f.Name] = true
	}
	if !maps.Equal(inZip, mapKeys(files)) {
		t.Errorf("the archive holds %v", slices.Sorted(maps.Keys(inZip)))
	}

	// A video the browser cannot play is said to be so, the original's
	// download button beside it. (After Download all: closing its view
	// focuses its tile, which scrolls the grid, and a click by position
	// begun meanwhile lands on another tile.)
	openTile("broken.mov")
	browserDo(t, ctx, pageUntil(`document.querySelector("#live-note").textContent !== ""`))
	if note := pageEval[string](t, ctx, `document.querySelector("#live-note").textContent`); note != "This browser cannot play this video (video/quicktime). Download the original to watch it elsewhere." {
		t.Errorf("a video Chromium cannot play: the page says %q", note)
	}
	if pageEval[bool](t, ctx, `document.querySelector("#download").hidden || !document.querySelector("#live").hidden`) {
		t.Error("a video Chromium cannot play: the original's download button is hidden, or a LIVE control shown")
	}
	browserDo(t, ctx, chromedp.KeyEvent(kb.Escape), pageUntil(viewerClosed))

	// A passphrase: asked for, labelled; a wrong one is said to be wrong
	// and can be retried.
	browserDo(t, ctx, chromedp.Navigate(open(guarded)), pageUntil(`document.body.dataset.state === "locked"`))
	if got := pageEval[string](t, ctx, `document.querySelector("label[for=passphrase]").textContent`); !strings.Contains(got, "passphrase") {
		t.Errorf("the passphrase field's label: %q", got)
	}
	browserDo(t, ctx, chromedp.SetValue("#passphrase", "not the passphrase"), chromedp.Click("#unlock button"),
		pageUntil(`document.querySelector("#unlock-error").textContent.includes("wrong")`),
		chromedp.SetValue("#passphrase", passphrase), chromedp.Click("#unlock button"),
		pageUntil(`document.body.dataset.loaded === "true"`))
	if got := pageEval[[]string](t, ctx, `[...document.querySelectorAll("#grid img")].map((i) => i.alt)`); !slices.Equal(got, []string{"IMG_0001.jpg"}) {
		t.Errorf("the passphrase link shows %q", got)
	}

	// Revoked, expired and unknown links read alike; a fragment missing,
	// cut short or changed makes the link incomplete.
	id := link[strings.LastIndex(link, "/")+1 : strings.Index(link, "#")]
	unknown := strings.Replace(link, id, strings.Repeat("0", 32), 1)
	base, fragment, _ := strings.Cut(single, "#")
	flipped := "A"
	if fragment[10] == 'A' {
		flipped = "B"
	}
	rig.mustRun(0, "", "unshare", id)
	rig.ts.Clock.Advance(time.Now().Add(48 * time.Hour).Sub(rig.ts.Clock.Now()))
	states := map[string]string{}
	for name, l := range map[string]string{"revoked": link, "expired": expiring, "unknown": unknown, "no fragment": base, "cut short": single[:len(single)-1],
		"changed": base + "#" + fragment[:10] + flipped + fragment[11:]} {
		browserDo(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(open(l)),
			pageUntil(`["unavailable", "incomplete", "error"].includes(document.body.dataset.state)`))
		states[name] = pageEval[string](t, ctx, `document.body.dataset.state + ": " + document.querySelector("#status").textContent`)
	}
	for name, want := range map[string]string{"revoked": "unavailable: This link is no longer available.", "unknown": "unavailable: This link is no longer available.",
		"expired":     "unavailable: This link is no longer available.",
		"no fragment": "incomplete: ", "cut short": "incomplete: ", "changed": "incomplete: "} {
		if !strings.HasPrefix(states[name], want) {
			t.Errorf("%s link: %q, want %q", name, states[name], want)
		}
	}

	// No part of a fragment, nor the passphrase, reached the server.
	front.mu.Lock()
	sent := strings.Join(front.requests, "\n")
	front.mu.Unlock()
	rig.mu.Lock()
	for _, b := range rig.bodies {
		sent += "\n" + string(b)
	}
	rig.mu.Unlock()
	for _, l := range []string{link, guarded, single, expiring} {
		_, secret, _ := strings.Cut(l, "#")
		for i := 0; i+8 <= len(secret); i++ {
			if part := secret[i : i+8]; strings.Contains(sent, part) || strings.Contains(logs.String(), part) {
				t.Fatalf("part of a link's fragment (%q) reached the server", part)
			}
		}
	}
	if strings.Contains(sent, passphrase) || strings.Contains(logs.String(), passphrase) {
		t.Fatal("the passphrase reached the server")
	}
}

// newBrowser starts headless Chromium for the test, with its own profile.
func newBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-component-update", true), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	// What the page logs or throws, shown when the test fails.
	chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.Logf("page: %s %s", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception.Description)
		case *runtime.EventConsoleAPICalled:
			for _, arg := range ev.Args {
				t.Logf("page console: %s %s", arg.Value, arg.Description)
			}
		}
	})
	return ctx
}

func browserDo(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v (page state %q)", err, pageState(ctx))
	}
}

// pageState is what the page says, for a failure's message.
func pageState(ctx context.Context) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.dataset.state + ": " + document.querySelector("#status").textContent +
		(document.querySelector("#viewer").open ? " (showing " + document.querySelector("#name").textContent + ")" : "")`))
	return s
}

func pageEval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("browser: %v\n%s", err, js)
	}
	return v
}

// viewerClosed is true once the large view is closed and its close
// handler has given the focus back to the tile that opened it: the dialog
// reads closed before that handler runs, and the focus scrolls the grid to
// the tile, so a click by position begun in between lands on another tile.
const viewerClosed = `!document.querySelector("#viewer").open && document.activeElement !== null && document.activeElement.closest("#grid") !== null`

// pageUntil waits, up to a minute, until js is true in the page.
func pageUntil(js string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(60*time.Second))
	return func(ctx context.Context, target *chromedp.Target) (chromedp.Void, error) {
		// chromedp's poll runs in the page's execution context as chromedp
		// last heard of it, which just after a navigation can still be the
		// page before's, gone already: the browser then answers that it
		// knows no such context, and the poll is started again, in the new
		// page's.
		// However long a loaded machine takes to tell chromedp of the new
		// context, up to the poll's own minute.
		deadline := time.Now().Add(time.Minute)
		for {
			v, err := poll(ctx, target)
			if err == nil || time.Now().After(deadline) || !strings.Contains(err.Error(), "Cannot find context with specified id") {
				return v, err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// waitFile waits for a download to be complete at path and returns it.
func waitFile(t *testing.T, ctx context.Context, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(filepath.Dir(path))
			t.Log(pageState(ctx))
			t.Fatalf("no download at %s (the folder holds %v)", path, entries)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func noise(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func mapKeys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
