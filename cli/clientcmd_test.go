package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"sealbox/blobs"
	"sealbox/cli/client"
	"sealbox/cli/library"
	"sealbox/cli/media/mediatest"
	"sealbox/cli/sealed"
	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server"
	"sealbox/server/servertest"
)

// clientRig runs the real sealbox binary as a person's client against a
// real server (servertest: bbolt and files, or PostgreSQL and S3), through
// a proxy that keeps every request body the client sent.
type clientRig struct {
	t       *testing.T
	bin     string
	ts      *servertest.TestServer
	url     string
	profile string

	mu     sync.Mutex
	bodies [][]byte
	// down is how many requests the proxy answers with a broken answer
	// (the server restarting, or gone): each one counts it down.
	down atomic.Int32
	// cred, when set, is the user the client runs as (asUser).
	cred *syscall.Credential
	// refuse, when set, is a request ("PUT /v1/auth/escrow") the proxy
	// answers as the server answers an internal error, without passing it on.
	refuse atomic.Pointer[string]
}

// newClientRig starts the server, edit adjusting its configuration, and
// the proxy in front of it.
func newClientRig(t *testing.T, edit ...func(*server.Config)) *clientRig {
	t.Helper()
	rig := &clientRig{t: t, bin: buildBinary(t), ts: servertest.MustOpenServer(t, edit...), profile: filepath.Join(t.TempDir(), "profile")}
	target, _ := url.Parse(rig.ts.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rig.down.Add(-1) >= 0 {
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Write([]byte("not HTTP\r\n\r\n"))
			conn.Close()
			return
		}
		if refused := rig.refuse.Load(); refused != nil && *refused == r.Method+" "+r.URL.Path {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"type":"https://sealbox.invalid/problems/error.internal","title":"Internal Server Error","status":500,"detail":"internal error","code":"error.internal"}`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		rig.mu.Lock()
		rig.bodies = append(rig.bodies, append([]byte(r.URL.String()+"\n"), body...))
		rig.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	rig.url = front.URL
	return rig
}

// run runs `sealbox client ARGS --profile P` with stdin and returns its
// standard output, standard error and exit status.
func (rig *clientRig) run(stdin string, args ...string) (string, string, int) {
	rig.t.Helper()
	cmd := exec.Command(rig.bin, append(append([]string{"client"}, args...), "--profile", rig.profile)...)
	cmd.Env = serveEnv()
	cmd.Stdin = strings.NewReader(stdin)
	if rig.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: rig.cred}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		rig.t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// mustRun is run that fails the test unless the command exits with want.
func (rig *clientRig) mustRun(want int, stdin string, args ...string) string {
	rig.t.Helper()
	out, errOut, code := rig.run(stdin, args...)
	if code != want {
		rig.t.Fatalf("sealbox client %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

// events are the JSON lines of a run, by their event.
func events(t *testing.T, out string) map[string][]map[string]any {
	t.Helper()
	by := map[string][]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		what, _ := ev["event"].(string)
		by[what] = append(by[what], ev)
	}
	return by
}

// The marker planted in a photo's EXIF and in a file name: it must never
// reach the server, in a request or in what it stores.
const plaintextMarker = "SEALBOXPLAINTEXTMARKER"

// TestClientSyncAndExport: a person signs up, syncs a folder of photos, a
// video and a PNG, and exports it back byte for byte with the capture times
// as file times. A second sync reads nothing and uploads nothing; a renamed
// file is recognised; a second export writes nothing. Nothing the server
// received or stores holds the marker planted in a photo's EXIF and in a
// file name. A blob damaged on the server is refused by export, naming the
// file and its album, the rest exported, exit 1. Wrong credentials and a
// profile others can read exit 2; logout removes the keys.
func TestClientSyncAndExport(t *testing.T) {
	rig := newClientRig(t)
	folder := filepath.Join(t.TempDir(), "Holiday")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 40_000) // an original over --inline-max: a blob file
	rand.Read(noise)
	files := map[string][]byte{
		"IMG_0001.jpg": mediatest.JPEG(64, 48, 1, mediatest.EXIF{DateTimeOriginal: "2023:07:14 18:03:12", Offset: "+02:00", Orientation: 6,
			Description: plaintextMarker, HasLocation: true, Latitude: 48.85, Longitude: 2.35}),
		"IMG_20220101_101010.jpg":           mediatest.JPEG(32, 32, 2, mediatest.EXIF{}),
		"photo-" + plaintextMarker + ".png": mediatest.PNG(20, 10),
		"clip.mp4":                          append([]byte("not a real video "), noise...),
		"notes.txt":                         []byte("not a photo"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(folder, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	out := rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin")
	recoveryKey := regexp.MustCompile(`[0-9A-Z]{4}(-[0-9A-Z]{4}){7}`).FindString(out)
	if recoveryKey == "" {
		t.Fatalf("signup printed no recovery key: %s", out)
	}
	fi, err := os.Stat(filepath.Join(rig.profile, "keys.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the keys file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}

	out = rig.mustRun(0, "", "sync", folder, "--json")
	ev := events(t, out)
	if len(ev["uploaded"]) != 4 || len(ev["failed"]) != 0 || ev["done"][0]["done"] != float64(4) {
		t.Fatalf("first sync: %s", out)
	}
	out = rig.mustRun(0, "", "sync", folder, "--json")
	if ev := events(t, out); len(ev["unchanged"]) != 4 || len(ev["uploaded"]) != 0 {
		t.Fatalf("second sync of an unchanged folder: %s", out)
	}
	if err := os.Rename(filepath.Join(folder, "IMG_20220101_101010.jpg"), filepath.Join(folder, "renamed.jpg")); err != nil {
		t.Fatal(err)
	}
	files["renamed.jpg"] = files["IMG_20220101_101010.jpg"]
	out = rig.mustRun(0, "", "sync", folder, "--json")
	if ev := events(t, out); len(ev["known"]) != 1 || len(ev["uploaded"]) != 0 {
		t.Fatalf("a renamed file: %s", out)
	}

	out = rig.mustRun(0, "", "status", "--json")
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil || st["synced_files"] != float64(5) || st["pending"] != float64(0) ||
		len(st["no_thumbnail"].([]any)) != 1 || !strings.HasSuffix(st["no_thumbnail"].([]any)[0].(string), "clip.mp4") {
		t.Fatalf("status: %s", out)
	}
	out = rig.mustRun(0, "", "albums")
	if !strings.Contains(out, "Holiday") {
		t.Fatalf("albums: %s", out)
	}
	dest := filepath.Join(t.TempDir(), "export")
	rig.mustRun(0, "", "export", dest)
	for _, name := range []string{"IMG_0001.jpg", "IMG_20220101_101010.jpg", "photo-" + plaintextMarker + ".png", "clip.mp4"} {
		got, err := os.ReadFile(filepath.Join(dest, "Holiday", name))
		if err != nil || !bytes.Equal(got, files[name]) {
			t.Fatalf("exported %s: %v, not byte-identical", name, err)
		}
	}
	fi, err = os.Stat(filepath.Join(dest, "Holiday", "IMG_0001.jpg"))
	if want := time.Date(2023, 7, 14, 16, 3, 12, 0, time.UTC); err != nil || !fi.ModTime().Equal(want) {
		t.Fatalf("the exported photo's time: %v, want its capture time %v", fi.ModTime(), want)
	}
	out = rig.mustRun(0, "", "export", dest, "--json")
	if ev := events(t, out); ev["done"][0]["done"] != float64(0) || len(ev["unchanged"]) != 4 {
		t.Fatalf("a second export: %s", out)
	}

	// The same photo in a second album is exported once, and hard-linked.
	best := filepath.Join(t.TempDir(), "Best")
	os.MkdirAll(best, 0o755)
	os.WriteFile(filepath.Join(best, "IMG_0001.jpg"), files["IMG_0001.jpg"], 0o644)
	rig.mustRun(0, "", "sync", best, "--album", "Best")
	both := filepath.Join(t.TempDir(), "both")
	out = rig.mustRun(0, "", "export", both, "--json")
	if ev := events(t, out); len(ev["linked"]) != 1 || len(ev["exported"]) != 4 {
		t.Fatalf("an export of two albums sharing a photo: %s", out)
	}
	a, errA := os.Stat(filepath.Join(both, "Holiday", "IMG_0001.jpg"))
	b, errB := os.Stat(filepath.Join(both, "Best", "IMG_0001.jpg"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Fatalf("the photo in two albums is not one file linked twice: %v %v", errA, errB)
	}

	// A link to the album opens, as a viewer would, with the fragment
	// alone; one with a passphrase also needs it; unshare ends a link.
	link := strings.TrimSpace(rig.mustRun(0, "", "share", "Holiday"))
	if got := openLink(t, link, ""); !bytes.Equal(got["IMG_0001.jpg"], files["IMG_0001.jpg"]) || len(got) != 4 {
		t.Fatalf("the link shows %d files, the photo's bytes %v", len(got), bytes.Equal(got["IMG_0001.jpg"], files["IMG_0001.jpg"]))
	}
	guarded := strings.TrimSpace(rig.mustRun(0, "a long passphrase\n", "share", "clip.mp4", "--passphrase-stdin", "--expires", "24h"))
	if got := openLink(t, guarded, "a long passphrase"); len(got) != 1 || !bytes.Equal(got["clip.mp4"], files["clip.mp4"]) {
		t.Fatalf("the passphrase link shows %d files", len(got))
	}
	if out := rig.mustRun(0, "", "shares"); !strings.Contains(out, link) || !strings.Contains(out, guarded) {
		t.Fatalf("shares does not list both links: %s", out)
	}
	id := strings.TrimPrefix(strings.SplitN(link, "#", 2)[0], rig.url+"/s/")
	rig.mustRun(0, "", "unshare", id)
	viewer, _ := client.New(rig.url, nil)
	if _, err := viewer.ShareInfo(t.Context(), id); client.CodeOf(err) != fault.ECodeShareNotFound {
		t.Fatalf("an unshared link: %v", err)
	}
	if _, errOut, code := rig.run("", "share", "no such album"); code != 2 || !strings.Contains(errOut, "no album, asset or file") {
		t.Fatalf("sharing what is not there: exit %d, %s", code, errOut)
	}

	// Nothing the server received or keeps names the marker.
	rig.mu.Lock()
	for _, b := range rig.bodies {
		if bytes.Contains(b, []byte(plaintextMarker)) {
			t.Errorf("a request carried the plaintext marker: %.200q", b)
		}
	}
	rig.mu.Unlock()
	filepath.WalkDir(rig.ts.Dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(plaintextMarker)) {
				t.Errorf("the server's %s holds the plaintext marker", path)
			}
		}
		return nil
	})

	// A flipped byte in the video's blob file: export refuses it by name.
	// On S3 there is no file to flip.
	if _, local := rig.ts.Blobs.(*blobs.Dir); local {
		if !flipOneBlobFile(t, rig.ts.Dir, 40_000) {
			t.Fatal("no blob file of the video found to damage")
		}
		out, errOut, code := rig.run("", "export", filepath.Join(t.TempDir(), "again"))
		if code != 1 || !strings.Contains(errOut, "clip.mp4 in album Holiday") || !strings.Contains(out, "exported 4 (") {
			t.Fatalf("export of a damaged blob: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
	}

	_, errOut, code := rig.run("a wrong password\n", "login", rig.url, "--email", "family@example.org", "--password-stdin")
	if code != 2 || !strings.Contains(errOut, "email or password is wrong") {
		t.Fatalf("a wrong password: exit %d, %s", code, errOut)
	}
	rig.mustRun(0, "correct horse battery\n", "login", rig.url, "--email", "family@example.org", "--password-stdin")

	// passwd: the new password signs in and opens the keys, the old one
	// does neither.
	rig.mustRun(0, "correct horse battery\nnew horse battery\n", "passwd", "--password-stdin")
	if _, _, code := rig.run("correct horse battery\n", "login", rig.url, "--email", "family@example.org", "--password-stdin"); code != 2 {
		t.Fatalf("the old password after passwd: exit %d", code)
	}
	rig.mustRun(0, "new horse battery\n", "login", rig.url, "--email", "family@example.org", "--password-stdin")

	// A forgotten password reset on the server (here through the API, as
	// sealbox users set-password does it): the new password signs in but
	// opens nothing, until recover opens the keys with the recovery key.
	resetPassword(t, rig, "family@example.org", "new horse battery", "reset password 1")
	_, errOut, code = rig.run("reset password 1\n", "login", rig.url, "--email", "family@example.org", "--password-stdin")
	if code != 2 || !strings.Contains(errOut, "recovery key") {
		t.Fatalf("a reset password before recover: exit %d, %s", code, errOut)
	}
	if _, errOut, code := rig.run("reset password 1\nAAAA-BBBB-CCCC-DDDD-EEEE-FFFF-GGGG-HHHH\n", "recover", rig.url, "--email", "family@example.org", "--password-stdin"); code != 2 || !strings.Contains(errOut, "mistyped") {
		t.Fatalf("a mistyped recovery key: exit %d, %s", code, errOut)
	}
	rig.mustRun(0, "reset password 1\n"+strings.ToLower(recoveryKey)+"\n", "recover", rig.url, "--email", "family@example.org", "--password-stdin")
	rig.mustRun(0, "reset password 1\n", "login", rig.url, "--email", "family@example.org", "--password-stdin")
	if out := rig.mustRun(0, "", "ls", "Holiday"); !strings.Contains(out, "IMG_0001.jpg") {
		t.Fatalf("after recover the photos do not open: %s", out)
	}
	if err := os.Chmod(rig.profile, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := rig.run("", "status"); code != 2 || !strings.Contains(errOut, "chmod 700") {
		t.Fatalf("a profile others can read: exit %d, %s", code, errOut)
	}
	os.Chmod(rig.profile, 0o700)
	rig.mustRun(0, "", "logout")
	if _, err := os.Stat(filepath.Join(rig.profile, "keys.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("logout left the keys: %v", err)
	}
	if _, errOut, code := rig.run("", "sync", folder); code != 2 || !strings.Contains(errOut, "not signed in") {
		t.Fatalf("sync signed out: exit %d, %s", code, errOut)
	}
}

// TestClientLogoutForgetsTheAccount: logout leaves nothing in the profile
// that opens a photo or a link: no file holds the key of the album the
// sync made (from which its photos' keys derive) or the secret of the
// link share made, and the index and the staged uploads are gone. The
// same folder, synced after signing up on another server, is uploaded
// there, not skipped as unchanged by what the first server was sent.
func TestClientLogoutForgetsTheAccount(t *testing.T) {
	rig := newClientRig(t)
	folder := photoFolder(t, "Holiday", map[string][]byte{
		"a.jpg": mediatest.JPEG(16, 16, 1, mediatest.EXIF{}),
		"b.jpg": mediatest.JPEG(16, 16, 2, mediatest.EXIF{}),
	})
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "forget@example.org", "--password-stdin")
	rig.mustRun(0, "", "sync", folder)
	_, secret, _ := strings.Cut(strings.TrimSpace(rig.mustRun(0, "", "share", "Holiday")), "#")
	ix, err := (&library.Profile{ConfigDir: rig.profile, StateDir: rig.profile}).OpenIndex()
	if err != nil {
		t.Fatal(err)
	}
	album, err := ix.Album("Holiday")
	ix.Close()
	if err != nil || album == nil || secret == "" {
		t.Fatalf("the album in the index: %v, %v; the link's secret %q", album, err, secret)
	}
	asJSON, _ := json.Marshal(album.Key)
	secrets := map[string][]byte{"the album key": album.Key[:], "the album key as JSON": asJSON, "the link's secret": []byte(secret)}
	// held lists the secrets a file of the profile holds, by file.
	held := func() []string {
		var found []string
		filepath.WalkDir(rig.profile, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				b, _ := os.ReadFile(path)
				for what, s := range secrets {
					if bytes.Contains(b, s) {
						found = append(found, what+" in "+path)
					}
				}
			}
			return nil
		})
		slices.Sort(found)
		return found
	}
	if found := held(); len(found) < 2 {
		t.Fatalf("signed in, the profile holds only %v: the search would prove nothing", found)
	}
	rig.mustRun(0, "", "logout")
	if found := held(); len(found) != 0 {
		t.Errorf("after logout the profile holds %v", found)
	}
	for _, gone := range []string{"index.db", "staged"} {
		if _, err := os.Stat(filepath.Join(rig.profile, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after logout the profile's %s: %v", gone, err)
		}
	}

	other := newClientRig(t)
	other.profile = rig.profile
	other.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", other.url, "--email", "forget@example.org", "--password-stdin")
	out := other.mustRun(0, "", "sync", folder, "--json")
	if ev := events(t, out); len(ev["uploaded"]) != 2 || len(ev["unchanged"]) != 0 {
		t.Fatalf("the folder synced to another server after logout: %s", out)
	}
	if out := other.mustRun(0, "", "ls", "Holiday"); !strings.Contains(out, "a.jpg") || !strings.Contains(out, "b.jpg") {
		t.Fatalf("the other server's album: %s", out)
	}
}

// TestClientSyncAfterSigningInAgain: logout forgets the index, and with it
// which albums hold which photos; after a login to the same account, the
// first sync rebuilds it from the account's albums on the server, as it
// reads and opens them. The folders synced again upload nothing and
// provision no album (every file, a Live Photo's pair too, is known by its
// keyed content hash in the album of its title), the albums stay two, and
// an export returns every photo exactly once. A sync after that reads
// nothing unchanged.
func TestClientSyncAfterSigningInAgain(t *testing.T) {
	rig := newClientRig(t)
	video := make([]byte, 30_000)
	rand.Read(video)
	holiday := map[string][]byte{
		"a.jpg":         mediatest.JPEG(16, 16, 1, mediatest.EXIF{}),
		"IMG_0001.HEIC": []byte("not a real HEIC, kept as it is"),
		"IMG_0001.MOV":  video,
	}
	best := map[string][]byte{"c.jpg": mediatest.JPEG(16, 16, 3, mediatest.EXIF{})}
	folders := []string{photoFolder(t, "Holiday", holiday), photoFolder(t, "Best", best)}
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "again@example.org", "--password-stdin")
	if ev := events(t, rig.mustRun(0, "", append([]string{"sync", "--json"}, folders...)...)); len(ev["uploaded"]) != 3 {
		t.Fatalf("the first sync: %v", ev)
	}
	rig.mustRun(0, "", "logout")
	rig.mustRun(0, "correct horse battery\n", "login", rig.url, "--email", "again@example.org", "--password-stdin")

	rig.mu.Lock()
	signedIn := len(rig.bodies)
	rig.mu.Unlock()
	out := rig.mustRun(0, "", append([]string{"sync", "--json"}, folders...)...)
	if ev := events(t, out); len(ev["known"]) != 3 || len(ev["uploaded"]) != 0 || len(ev["failed"]) != 0 {
		t.Fatalf("the sync after signing in again to the same account: %s", out)
	}
	rig.mu.Lock()
	for _, b := range rig.bodies[signedIn:] {
		target, body, _ := strings.Cut(string(b), "\n")
		u, _ := url.Parse(target)
		if strings.HasPrefix(u.Path, "/v1/uploads/") || strings.HasSuffix(u.Path, "/uploads") || strings.HasSuffix(u.Path, "/ops") ||
			(u.Path == "/v1/albums" && body != "") {
			t.Errorf("the sync after signing in again sent %s %.100q", u.Path, body)
		}
	}
	rig.mu.Unlock()
	var titles []string
	for _, line := range strings.Split(strings.TrimSpace(rig.mustRun(0, "", "albums", "--json")), "\n") {
		var a struct{ Album string }
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		titles = append(titles, a.Album)
	}
	if slices.Sort(titles); !slices.Equal(titles, []string{"Best", "Holiday"}) {
		t.Fatalf("the account's albums after syncing again: %q, want Best and Holiday once each", titles)
	}

	dest := filepath.Join(t.TempDir(), "export")
	rig.mustRun(0, "", "export", dest)
	want := map[string][]byte{}
	for name, b := range holiday {
		want[filepath.Join("Holiday", name)] = b
	}
	for name, b := range best {
		want[filepath.Join("Best", name)] = b
	}
	got := map[string][]byte{}
	filepath.WalkDir(dest, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dest, path)
			got[rel], _ = os.ReadFile(path)
		}
		return nil
	})
	if !reflect.DeepEqual(got, want) {
		names := slices.Sorted(maps.Keys(got))
		t.Fatalf("the export after syncing again holds %q, want each of the %d photos once, byte for byte", names, len(want))
	}
	if ev := events(t, rig.mustRun(0, "", append([]string{"sync", "--json"}, folders...)...)); len(ev["unchanged"]) != 3 {
		t.Fatalf("a third sync: %v", ev)
	}
}

// TestClientSignInToAnotherAccount: a profile signed in to one account
// refuses a signup (before the server is asked: the account can be made
// after logout) and a login to an account of another server, exit 2,
// saying to log out first, and stays signed in to its account. A login to
// its own account again, at another address of its server, is taken and
// keeps the index: the folder is still unchanged.
func TestClientSignInToAnotherAccount(t *testing.T) {
	rig := newClientRig(t)
	other := newClientRig(t)
	other.profile = filepath.Join(t.TempDir(), "other")
	other.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", other.url, "--email", "other@example.org", "--password-stdin")
	folder := photoFolder(t, "Holiday", map[string][]byte{"a.jpg": mediatest.JPEG(16, 16, 1, mediatest.EXIF{})})
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "first@example.org", "--password-stdin")
	rig.mustRun(0, "", "sync", folder)

	for _, args := range [][]string{
		{"signup", rig.url, "--email", "second@example.org"},
		{"signup", other.url, "--email", "second@example.org"},
		{"login", other.url, "--email", "other@example.org"},
	} {
		_, errOut, code := rig.run("correct horse battery\ncorrect horse battery\n", append(args, "--password-stdin")...)
		if code != 2 || !strings.Contains(errOut, "this device is signed in as first@example.org on ") ||
			!strings.Contains(errOut, ": run sealbox client logout first") {
			t.Fatalf("%s while signed in to another account: exit %d, %s", strings.Join(args, " "), code, errOut)
		}
	}
	if out := rig.mustRun(0, "", "status", "--json"); !strings.Contains(out, `"email":"first@example.org"`) || !strings.Contains(out, `"server":"`+rig.url) {
		t.Fatalf("status after the refusals: %s", out)
	}

	rig.mustRun(0, "correct horse battery\n", "login", rig.ts.URL(), "--email", "first@example.org", "--password-stdin")
	out := rig.mustRun(0, "", "sync", folder, "--json")
	if ev := events(t, out); len(ev["unchanged"]) != 1 {
		t.Fatalf("a sync after signing in again to the same account: %s", out)
	}
	rig.mustRun(0, "", "logout")
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "second@example.org", "--password-stdin")
}

// flipOneBlobFile flips a byte in the one blob file under dir of more than
// min bytes (a sealed original over --inline-max), and reports whether it
// found one.
func flipOneBlobFile(t *testing.T, dir string, min int64) bool {
	t.Helper()
	var found string
	filepath.WalkDir(filepath.Join(dir, "blobs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && len(d.Name()) == 64 {
			if fi, _ := d.Info(); fi != nil && fi.Size() > min {
				found = path
			}
		}
		return nil
	})
	if found == "" {
		return false
	}
	b, err := os.ReadFile(found)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	os.Chmod(found, 0o644)
	if err := os.WriteFile(found, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return true
}

// openLink opens a share link as a browser's viewer does (FORMAT.md §9),
// without a token: the share index under the key in the fragment (and the
// passphrase), then each asset's metadata and original. It returns the
// originals by name.
func openLink(t *testing.T, link, passphrase string) map[string][]byte {
	t.Helper()
	base, fragment, ok := strings.Cut(link, "#")
	if !ok {
		t.Fatalf("a link without a fragment: %s", link)
	}
	i := strings.LastIndex(base, "/s/")
	server, id := base[:i], base[i+3:]
	secret, err := sealed.ParseFragment(fragment)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	viewer, _ := client.New(server, nil)
	info, err := viewer.ShareInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	key := secret.Key()
	if info.PassphraseProtected {
		wrapped, err := viewer.WrappedSecret(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if key, err = sealed.OpenWrappedSecret(wrapped, secret, passphrase); err != nil {
			t.Fatal(err)
		}
	}
	read := func(hash string) []byte {
		r, err := viewer.ReadSharedBlob(ctx, id, hash, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		return b
	}
	idx, err := sealed.OpenShareIndex(key, read(info.MetadataHash))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, item := range idx.Items {
		md, err := sealed.OpenMetadata(item.AssetKey, read(item.MetadataHash))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := sealed.NewReader(item.AssetKey.BlobKey(sealed.RoleOriginal), bytes.NewReader(read(md.Blobs[sealed.RoleOriginal].Hash)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(plain)
		if err != nil {
			t.Fatal(err)
		}
		out[md.Name] = b
	}
	return out
}

// resetPassword sets the account's password on the server to the login
// secret of next, leaving the escrow as it is: what an operator's reset
// of a forgotten password does.
func resetPassword(t *testing.T, rig *clientRig, email, current, next string) {
	t.Helper()
	c, _ := client.New(rig.url, nil)
	if _, _, err := c.Login(t.Context(), email, sealed.LoginSecret(email, current), ""); err != nil {
		t.Fatal(err)
	}
	if err := c.ChangePassword(t.Context(), sealed.LoginSecret(email, current), sealed.LoginSecret(email, next)); err != nil {
		t.Fatal(err)
	}
}

// TestClientSyncSurvivesKill: a sync of 500 photos killed (SIGKILL) three
// times at different moments, then run to its end: every photo is on the
// server exactly once (no asset twice, no blob nobody refers to: the store
// holds exactly five blobs a photo, its original, thumbnail, preview,
// metadata and manifest), and an export is byte-identical to the folder.
func TestClientSyncSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("500 photos synced four times")
	}
	rig := newClientRig(t)
	folder := filepath.Join(t.TempDir(), "Many")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 500
	files := map[string][]byte{}
	for i := range n {
		name := "IMG_" + strings.Repeat("0", 4-len(itoa(i))) + itoa(i) + ".jpg"
		files[name] = mediatest.JPEG(8+i%7, 8+i%5, byte(i), mediatest.EXIF{Description: itoa(i)})
		if err := os.WriteFile(filepath.Join(folder, name), files[name], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "kill@example.org", "--password-stdin")
	for _, after := range []time.Duration{300 * time.Millisecond, 900 * time.Millisecond, 1500 * time.Millisecond} {
		cmd := exec.Command(rig.bin, "client", "sync", folder, "--jobs", "4", "--json", "--profile", rig.profile)
		cmd.Env = serveEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(after) // the moment of the kill is what varies, not a wait for an expiry
		cmd.Process.Kill()
		cmd.Wait()
	}
	last := events(t, rig.mustRun(0, "", "sync", folder, "--jobs", "4", "--json"))
	t.Logf("the run after three kills uploaded %d of %d photos", len(last["uploaded"]), n)
	out := rig.mustRun(0, "", "ls", "Many", "--json")
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var a map[string]any
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		seen[a["name"].(string)]++
	}
	if len(seen) != n {
		t.Fatalf("%d distinct photos on the server, want %d", len(seen), n)
	}
	for name, count := range seen {
		if count != 1 {
			t.Errorf("%s is %d assets", name, count)
		}
	}
	count, _, err := rig.ts.Store.BlobTotals()
	if err != nil {
		t.Fatal(err)
	}
	if count != 5*n {
		t.Errorf("the store holds %d blobs, want %d (five a photo): a killed run left blobs nobody refers to", count, 5*n)
	}
	dest := filepath.Join(t.TempDir(), "export")
	rig.mustRun(0, "", "export", dest)
	for name, b := range files {
		if got, err := os.ReadFile(filepath.Join(dest, "Many", name)); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("exported %s: %v, not byte-identical", name, err)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestClientSyncWatch: sync --watch uploads a photo copied into the folder
// once it has settled, and one copied in after the folder was moved away
// and back (as an unmounted and remounted disk is).
func TestClientSyncWatch(t *testing.T) {
	rig := newClientRig(t)
	folder := filepath.Join(t.TempDir(), "Camera")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "watch@example.org", "--password-stdin")
	cmd := exec.Command(rig.bin, "client", "sync", folder, "--watch", "--settle", "200ms", "--rescan", "2s", "--json", "--profile", rig.profile)
	cmd.Env = serveEnv()
	var out syncBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	uploaded := func(name string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.Contains(line, `"event":"uploaded"`) && strings.Contains(line, name) {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s was not uploaded by the watch; its output:\n%s", name, out.String())
	}
	os.WriteFile(filepath.Join(folder, "IMG_1.jpg"), mediatest.JPEG(16, 16, 1, mediatest.EXIF{}), 0o644)
	uploaded("IMG_1.jpg")
	away := folder + ".unmounted"
	if err := os.Rename(folder, away); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the watch sees the folder gone
	if err := os.Rename(away, folder); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(folder, "IMG_2.jpg"), mediatest.JPEG(16, 16, 2, mediatest.EXIF{}), 0o644)
	uploaded("IMG_2.jpg")
}

// TestClientSyncStops: a server that does not answer for a while (a
// restart) is retried with backoff and the sync resumes and ends well; one
// that stays away is given up on with a message that says so, exit 2; a
// quota too small for the next photo stops the sync with the numbers,
// exit 2.
func TestClientSyncStops(t *testing.T) {
	rig := newClientRig(t)
	folder := filepath.Join(t.TempDir(), "Trip")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, seed byte) {
		if err := os.WriteFile(filepath.Join(folder, name), mediatest.JPEG(24, 24, seed, mediatest.EXIF{}), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "stops@example.org", "--password-stdin")
	write("a.jpg", 1)
	write("b.jpg", 2)
	rig.down.Store(3)
	out := rig.mustRun(0, "", "sync", folder, "--json", "--retries", "5")
	if ev := events(t, out); len(ev["uploaded"]) != 2 || len(ev["failed"]) != 0 {
		t.Fatalf("a sync through a restart: %s", out)
	}

	write("c.jpg", 3)
	rig.down.Store(1 << 20)
	_, errOut, code := rig.run("", "sync", folder, "--retries", "2")
	rig.down.Store(0)
	if code != 2 || !strings.Contains(errOut, "gave up after 2 tries") || !strings.Contains(errOut, "did not answer") {
		t.Fatalf("a server that stays away: exit %d, %s", code, errOut)
	}

	if err := rig.ts.Store.SetQuota("stops@example.org", 1); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = rig.run("", "sync", folder)
	if code != 2 || !strings.Contains(errOut, "past its quota (room for 0 more bytes)") ||
		!regexp.MustCompile(`c\.jpg \([0-9]+ bytes\) does not fit, after 0 files \(0 bytes\) uploaded in this run`).MatchString(errOut) {
		t.Fatalf("a full quota: exit %d, %s", code, errOut)
	}
}

// TestClientSyncRestagesForAnotherAlbum: a photo staged by a sync into one
// album that ended before the server had it (the server went away) is
// sealed again when its folder is next synced into another album, not sent
// with the staging whose manifest names the first album (refused, 422, on
// every run): it is uploaded into the second album and exports byte for
// byte, and nothing is left staged.
func TestClientSyncRestagesForAnotherAlbum(t *testing.T) {
	rig := newClientRig(t)
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "restage@example.org", "--password-stdin")
	// The album First is made by a sync of another folder, so that the
	// interrupted run below stages its photo before its first request.
	rig.mustRun(0, "", "sync", photoFolder(t, "Other", map[string][]byte{"other.jpg": mediatest.JPEG(24, 24, 1, mediatest.EXIF{})}), "--album", "First")
	photo := mediatest.JPEG(24, 24, 2, mediatest.EXIF{})
	folder := photoFolder(t, "Trip", map[string][]byte{"a.jpg": photo})
	rig.down.Store(1 << 20)
	_, errOut, code := rig.run("", "sync", folder, "--album", "First", "--retries", "1")
	rig.down.Store(0)
	if code != 2 || !strings.Contains(errOut, "did not answer") {
		t.Fatalf("a sync while the server is away: exit %d, %s", code, errOut)
	}
	if out := rig.mustRun(0, "", "status", "--json"); !strings.Contains(out, `"pending":1`) {
		t.Fatalf("the interrupted sync left no staged photo: %s", out)
	}

	out, errOut, code := rig.run("", "sync", folder, "--album", "Second", "--json")
	if ev := events(t, out); code != 0 || len(ev["uploaded"]) != 1 {
		t.Fatalf("a sync into another album of a photo staged for the first: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if out := rig.mustRun(0, "", "status", "--json"); !strings.Contains(out, `"pending":0`) {
		t.Fatalf("status after the sync: %s", out)
	}
	dest := filepath.Join(t.TempDir(), "export")
	rig.mustRun(0, "", "export", dest, "--album", "Second")
	if got, err := os.ReadFile(filepath.Join(dest, "Second", "a.jpg")); err != nil || !bytes.Equal(got, photo) {
		t.Fatalf("the photo exported from the second album: %v, byte-identical %v", err, bytes.Equal(got, photo))
	}
}

// TestClientSignupByInvitation: on a server that registers by invitation,
// signup without a code is refused (exit 2, the server's words), and the
// invitation link URL/#invite=CODE signs up.
func TestClientSignupByInvitation(t *testing.T) {
	rig := newClientRig(t, func(c *server.Config) { c.Registration = server.RegistrationInvite })
	if err := rig.ts.Store.CreateInvite(kv.Invite{ID: "inv", Email: "invited@example.org", ExpiresAt: time.Now().Add(time.Hour)}, "sbx_in_family"); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := rig.run("correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "invited@example.org", "--password-stdin")
	if code != 2 || !strings.Contains(errOut, "invit") {
		t.Fatalf("signup without an invitation: exit %d, %s", code, errOut)
	}
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url+"/#invite=sbx_in_family", "--email", "invited@example.org", "--password-stdin")
	if out := rig.mustRun(0, "", "status"); !strings.Contains(out, "invited@example.org") {
		t.Fatalf("status after an invited signup: %s", out)
	}
}

// TestClientSignupFinishesAfterAFailure: a signup the server fails after
// the account exists keeps the keys it made on this device (keys.json, mode
// 0600): the profile refuses sync (nothing is sealed with keys the server
// holds no escrow of) and login (which would replace or remove them), both
// saying to run signup again, and signup run again finishes, printing a
// recovery key that opens the account's escrow with those keys. Failed
// there: the escrow's store (password escrow), and, with
// --no-password-escrow, the directory publish after the escrow under a
// recovery key the failed run never showed, the only key to it.
func TestClientSignupFinishesAfterAFailure(t *testing.T) {
	for _, tc := range []struct {
		name, refuse string
		flags        []string
	}{
		{"escrow refused", "PUT /v1/auth/escrow", nil},
		{"directory refused after a recovery-only escrow", "POST /v1/auth/devices/directory", []string{"--no-password-escrow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newClientRig(t)
			const email, password = "unfinished@example.org", "correct horse battery"
			signup := append([]string{"signup", rig.url, "--email", email, "--password-stdin"}, tc.flags...)
			rig.refuse.Store(&tc.refuse)
			_, errOut, code := rig.run(password+"\n"+password+"\n", signup...)
			if code != 2 || !strings.Contains(errOut, "internal error") || !strings.Contains(errOut, "run sealbox client signup again") {
				t.Fatalf("a signup the server fails: exit %d, %s", code, errOut)
			}
			rig.refuse.Store(nil)
			keysFile := filepath.Join(rig.profile, "keys.json")
			if fi, err := os.Stat(keysFile); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("the keys after the failed signup: %v (want a file of mode 0600)", err)
			}
			kept, _ := os.ReadFile(keysFile)
			folder := photoFolder(t, "Holiday", map[string][]byte{"a.jpg": mediatest.JPEG(16, 16, 1, mediatest.EXIF{})})
			for _, args := range [][]string{{"sync", folder}, {"login", rig.url, "--email", email, "--password-stdin"}} {
				if _, errOut, code := rig.run(password+"\n", args...); code != 2 || !strings.Contains(errOut, "run sealbox client signup again") {
					t.Fatalf("%s after the failed signup: exit %d, %s", args[0], code, errOut)
				}
			}
			if now, _ := os.ReadFile(keysFile); !bytes.Equal(now, kept) {
				t.Fatal("the refused commands changed or removed the keys of the failed signup")
			}

			out := rig.mustRun(0, password+"\n"+password+"\n", signup...)
			recoveryKey := regexp.MustCompile(`[0-9A-Z]{4}(-[0-9A-Z]{4}){7}`).FindString(out)
			if recoveryKey == "" {
				t.Fatalf("signup run again printed no recovery key: %s", out)
			}
			if ev := events(t, rig.mustRun(0, "", "sync", folder, "--json")); len(ev["uploaded"]) != 1 {
				t.Fatalf("a sync after the signup finished: %v", ev)
			}
			// The recovery key printed opens the escrow, with the keys the
			// photo was sealed under: after logout, and a password the
			// escrow does not open, recover gets the photo back.
			rig.mustRun(0, "", "logout")
			newPassword := password
			if len(tc.flags) == 0 {
				newPassword = "reset password 1"
				resetPassword(t, rig, email, password, newPassword)
			}
			rig.mustRun(0, newPassword+"\n"+recoveryKey+"\n", "recover", rig.url, "--email", email, "--password-stdin")
			if out := rig.mustRun(0, "", "ls", "Holiday"); !strings.Contains(out, "a.jpg") {
				t.Fatalf("the photo after recover with the recovery key signup printed: %s", out)
			}
		})
	}
}

// asUser makes the rig's client run as uid (and gid) from now on, with the
// profile its own and the binary and the test's folders reachable by it:
// the tests run as root, for whom no permission bit makes a file
// unreadable.
func (rig *clientRig) asUser(uid uint32) {
	rig.t.Helper()
	if err := os.MkdirAll(rig.profile, 0o700); err != nil {
		rig.t.Fatal(err)
	}
	if err := os.Chown(rig.profile, int(uid), int(uid)); err != nil {
		rig.t.Fatal(err)
	}
	// t.TempDir's folders are 0700: their ancestors up to the root must be
	// enterable by the other user.
	for _, p := range []string{rig.bin, rig.profile} {
		for d := filepath.Dir(p); d != filepath.Dir(d); d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o055); err != nil {
					rig.t.Fatal(err)
				}
			}
		}
	}
	rig.cred = &syscall.Credential{Uid: uid, Gid: uid}
}

// TestClientShareByFileName: a file name picks the photo of that name; the
// same photo in two albums is shown once, and a name two different photos
// have (two cameras' IMG_0001.jpg) is refused, naming both by id and album,
// so the person shares the one they mean by its id and never both.
func TestClientShareByFileName(t *testing.T) {
	rig := newClientRig(t)
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "names@example.org", "--password-stdin")
	photo := mediatest.JPEG(40, 30, 1, mediatest.EXIF{})
	rig.mustRun(0, "", "sync", photoFolder(t, "Holiday", map[string][]byte{"IMG_0001.jpg": photo}))
	rig.mustRun(0, "", "sync", photoFolder(t, "Best", map[string][]byte{"IMG_0001.jpg": photo}))
	var shared library.Link
	if err := json.Unmarshal([]byte(rig.mustRun(0, "", "share", "IMG_0001.jpg", "--json")), &shared); err != nil || shared.Assets != 1 {
		t.Fatalf("a link to the photo that is in two albums: %+v (%v), want 1 asset", shared, err)
	}
	rig.mustRun(0, "", "sync", photoFolder(t, "Other camera", map[string][]byte{"IMG_0001.jpg": mediatest.JPEG(40, 30, 9, mediatest.EXIF{})}))
	_, errOut, code := rig.run("", "share", "IMG_0001.jpg")
	if code != 2 || !strings.Contains(errOut, `"IMG_0001.jpg" names 2 different photos (`) || !strings.Contains(errOut, " in Other camera") ||
		!strings.Contains(errOut, "give the asset id of the one to share") {
		t.Fatalf("sharing a name two photos have: exit %d, %s", code, errOut)
	}
	other := ""
	for _, line := range strings.Split(rig.mustRun(0, "", "ls", "Other camera", "--json"), "\n") {
		var item struct {
			AssetID string `json:"asset_id"`
		}
		if json.Unmarshal([]byte(line), &item) == nil && item.AssetID != "" {
			other = item.AssetID
		}
	}
	if other == "" || !strings.Contains(errOut, other+" in Other camera") {
		t.Fatalf("the refusal does not name the other camera's photo %q: %s", other, errOut)
	}
	if err := json.Unmarshal([]byte(rig.mustRun(0, "", "share", other, "--json")), &shared); err != nil || shared.Assets != 1 || shared.Title != "Other camera" {
		t.Fatalf("a link to the other camera's photo by its id: %+v (%v)", shared, err)
	}
}

// photoFolder makes a folder named name, readable by everyone, holding
// files.
func photoFolder(t *testing.T, name string, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	folder := filepath.Join(dir, name)
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(folder, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return folder
}

// TestClientSyncSkipsAnUnreadableFile: a photo the client's user cannot
// read is skipped and listed, the others are synced, exit 1.
func TestClientSyncSkipsAnUnreadableFile(t *testing.T) {
	rig := newClientRig(t)
	folder := photoFolder(t, "Party", map[string][]byte{
		"a.jpg":      mediatest.JPEG(16, 16, 1, mediatest.EXIF{}),
		"b.jpg":      mediatest.JPEG(16, 16, 2, mediatest.EXIF{}),
		"secret.jpg": mediatest.JPEG(16, 16, 3, mediatest.EXIF{}),
	})
	secret := filepath.Join(folder, "secret.jpg")
	// Root reads any file: the client runs as another user, for whom
	// root's file of mode 0600 is unreadable; run by another user, the
	// test takes every permission away.
	mode := os.FileMode(0)
	if os.Geteuid() == 0 {
		rig.asUser(65534)
		mode = 0o600
	}
	if err := os.Chmod(secret, mode); err != nil {
		t.Fatal(err)
	}
	if f, err := os.Open(secret); err == nil && os.Geteuid() != 0 {
		f.Close()
		t.Fatal("a file of mode 0000 is readable: the test cannot make an unreadable file")
	}
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "unreadable@example.org", "--password-stdin")
	out, errOut, code := rig.run("", "sync", folder, "--json")
	ev := events(t, out)
	if code != 1 || len(ev["uploaded"]) != 2 || len(ev["failed"]) != 1 || ev["failed"][0]["path"] != secret ||
		!strings.Contains(ev["failed"][0]["error"].(string), "permission denied") || !strings.Contains(errOut, "1 files failed: "+secret) {
		t.Fatalf("a sync with an unreadable file: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if out := rig.mustRun(0, "", "ls", "Party"); !strings.Contains(out, "a.jpg") || !strings.Contains(out, "b.jpg") || strings.Contains(out, "secret.jpg") {
		t.Fatalf("the album after the sync: %s", out)
	}
}

// TestClientSyncFollowsALinkedFolder: a folder given that is a symbolic
// link is synced, into an album named after the link; the links inside it,
// to a photo and to a folder of photos, are not followed, and each is
// listed as skipped, in the events and the counts, exit 0.
func TestClientSyncFollowsALinkedFolder(t *testing.T) {
	rig := newClientRig(t)
	target := photoFolder(t, "2023-07", map[string][]byte{
		"a.jpg": mediatest.JPEG(16, 16, 1, mediatest.EXIF{}),
		"b.jpg": mediatest.JPEG(16, 16, 2, mediatest.EXIF{}),
	})
	elsewhere := photoFolder(t, "Elsewhere", map[string][]byte{"c.jpg": mediatest.JPEG(16, 16, 3, mediatest.EXIF{})})
	holiday := filepath.Join(t.TempDir(), "Holiday")
	for link, to := range map[string]string{filepath.Join(target, "c.jpg"): filepath.Join(elsewhere, "c.jpg"),
		filepath.Join(target, "more"): elsewhere, holiday: target} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}
	// Files are listed by their paths in the folder the link leads to.
	resolved, err := filepath.EvalSymlinks(target)
	if err != nil {
		t.Fatal(err)
	}
	linkedPhoto, linkedFolder := filepath.Join(resolved, "c.jpg"), filepath.Join(resolved, "more")
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "linked@example.org", "--password-stdin")

	out := rig.mustRun(0, "", "sync", holiday, "--json")
	ev := events(t, out)
	var skipped []string
	for _, e := range ev["skipped"] {
		if !strings.Contains(e["error"].(string), "symbolic link") {
			t.Errorf("a skipped link says %q", e["error"])
		}
		skipped = append(skipped, e["path"].(string))
	}
	slices.Sort(skipped)
	if len(ev["uploaded"]) != 2 || !slices.Equal(skipped, []string{linkedPhoto, linkedFolder}) ||
		ev["done"][0]["skipped"] != float64(2) || ev["done"][0]["failed"] != float64(0) {
		t.Fatalf("a sync of a linked folder: %s", out)
	}
	if out := rig.mustRun(0, "", "ls", "Holiday"); !strings.Contains(out, "a.jpg") || !strings.Contains(out, "b.jpg") || strings.Contains(out, "c.jpg") {
		t.Fatalf("the album named after the link: %s", out)
	}
	out = rig.mustRun(0, "", "sync", holiday)
	if !strings.Contains(out, "skipped   "+linkedPhoto+": a symbolic link") || !strings.Contains(out, "skipped   "+linkedFolder+": a symbolic link") ||
		!strings.Contains(out, "uploaded 0 (0 B), 0 updated, 2 unchanged, 0 already there, 0 failed, 2 skipped, in ") {
		t.Fatalf("a second sync of the linked folder: %s", out)
	}
}

// TestClientSyncRereadsAChangingFile: a video still being written while the
// sync reads it is read again once it has stayed the same for --settle,
// and what the server keeps is its final content.
func TestClientSyncRereadsAChangingFile(t *testing.T) {
	rig := newClientRig(t)
	start := make([]byte, 1<<20)
	rand.Read(start)
	folder := photoFolder(t, "Copying", map[string][]byte{"clip.mp4": start})
	clip := filepath.Join(folder, "clip.mp4")
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "changing@example.org", "--password-stdin")

	// The file grows every few milliseconds for three seconds, from before
	// the sync starts: whenever the sync reads it, it changes meanwhile.
	f, err := os.OpenFile(clip, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	final := append([]byte(nil), start...)
	written := make(chan struct{})
	go func() {
		defer close(written)
		defer f.Close()
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			chunk := make([]byte, 4096)
			rand.Read(chunk)
			if _, err := f.Write(chunk); err != nil {
				t.Error(err)
				return
			}
			final = append(final, chunk...)
			time.Sleep(5 * time.Millisecond) // the pace of a copy, not a wait for an expiry
		}
	}()
	out, errOut, code := rig.run("", "sync", folder, "--json", "--settle", "300ms")
	<-written
	if ev := events(t, out); code != 0 || len(ev["uploaded"]) != 1 || ev["uploaded"][0]["size"] != float64(len(final)) {
		t.Fatalf("a sync of a file being written: exit %d (the file is %d bytes)\nstdout: %s\nstderr: %s", code, len(final), out, errOut)
	}
	dest := filepath.Join(t.TempDir(), "export")
	rig.mustRun(0, "", "export", dest)
	if got, err := os.ReadFile(filepath.Join(dest, "Copying", "clip.mp4")); err != nil || !bytes.Equal(got, final) {
		t.Fatalf("the exported file: %v, %d bytes; want the final %d bytes, byte for byte", err, len(got), len(final))
	}
}

// TestClientExportDiskFull: an export onto a disk that fills up names the
// file that did not fit, exit 1, leaves nothing of it under its name or a
// temporary one, and exports the rest.
func TestClientExportDiskFull(t *testing.T) {
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=1m"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mounting a small tmpfs (the test needs root, or CAP_SYS_ADMIN): %v", err)
		}
		t.Skipf("mounting a small tmpfs needs root or CAP_SYS_ADMIN: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, 0) })
	rig := newClientRig(t)
	big := make([]byte, 3<<20)
	rand.Read(big)
	photo := mediatest.JPEG(32, 32, 1, mediatest.EXIF{})
	folder := photoFolder(t, "Film", map[string][]byte{"big.mp4": big, "small.jpg": photo})
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "full@example.org", "--password-stdin")
	rig.mustRun(0, "", "sync", folder)

	out, errOut, code := rig.run("", "export", disk, "--jobs", "1")
	if code != 1 || !strings.Contains(errOut, "big.mp4 in album Film") || !strings.Contains(errOut, "no space left on device") ||
		!strings.Contains(out, "exported 1 (") {
		t.Fatalf("an export onto a full disk: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	entries, err := os.ReadDir(filepath.Join(disk, "Film"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "small.jpg" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("the full disk holds %v, want small.jpg alone", names)
	}
	if got, err := os.ReadFile(filepath.Join(disk, "Film", "small.jpg")); err != nil || !bytes.Equal(got, photo) {
		t.Fatalf("the photo that fitted: %v, not byte-identical", err)
	}
}

// TestClientExportKeepsFilesAlreadyThere: an export into a folder that
// already holds another file under an exported photo's name (the person's
// own edit of it, another camera's photo of that name) keeps that file
// byte for byte and writes the photo under another name, where a second
// export finds it and writes nothing. Two photos whose names differ only
// in case get names that differ otherwise: on a case-insensitive file
// system (macOS's, Windows's) their names would be one file's.
func TestClientExportKeepsFilesAlreadyThere(t *testing.T) {
	rig := newClientRig(t)
	files := map[string][]byte{
		"IMG_0001.JPG": mediatest.JPEG(32, 32, 1, mediatest.EXIF{DateTimeOriginal: "2024:05:06 07:08:09"}),
		"img_0001.jpg": mediatest.JPEG(32, 32, 2, mediatest.EXIF{DateTimeOriginal: "2024:05:06 07:08:10"}),
		"IMG_0002.JPG": mediatest.JPEG(24, 24, 3, mediatest.EXIF{DateTimeOriginal: "2024:05:06 07:08:11"}),
	}
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "clobber@example.org", "--password-stdin")
	if ev := events(t, rig.mustRun(0, "", "sync", photoFolder(t, "Trip", files), "--json")); len(ev["uploaded"]) != 3 {
		t.Fatalf("a sync of three photos: %v", ev)
	}
	dest := filepath.Join(t.TempDir(), "export")
	trip := filepath.Join(dest, "Trip")
	if err := os.MkdirAll(trip, 0o755); err != nil {
		t.Fatal(err)
	}
	mine := []byte("the person's own edit of IMG_0002.JPG")
	existing := filepath.Join(trip, "IMG_0002.JPG")
	if err := os.WriteFile(existing, mine, 0o644); err != nil {
		t.Fatal(err)
	}

	// exported checks the folder: the person's file as it was, and each
	// photo byte for byte under a name of its own, no two names the same
	// but for case.
	exported := func(run string) {
		t.Helper()
		if got, err := os.ReadFile(existing); err != nil || !bytes.Equal(got, mine) {
			t.Fatalf("%s: the file already at IMG_0002.JPG: %v, %d bytes; want its %d bytes kept byte for byte", run, err, len(got), len(mine))
		}
		entries, err := os.ReadDir(trip)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]string{} // lowercase name -> name
		at := map[string]string{}    // photo -> the name it has
		for _, e := range entries {
			if prev, ok := names[strings.ToLower(e.Name())]; ok {
				t.Errorf("%s: %s and %s differ only in case: one file on a case-insensitive disk", run, prev, e.Name())
			}
			names[strings.ToLower(e.Name())] = e.Name()
			got, err := os.ReadFile(filepath.Join(trip, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for name, b := range files {
				if bytes.Equal(got, b) {
					at[name] = e.Name()
				}
			}
		}
		if len(entries) != len(files)+1 || len(at) != len(files) {
			t.Fatalf("%s: the folder holds %v, the photos are at %v; want the person's file and the %d photos", run, names, at, len(files))
		}
		if at["IMG_0002.JPG"] == "IMG_0002.JPG" {
			t.Fatalf("%s: the photo took the name of the file that was there", run)
		}
	}
	out := rig.mustRun(0, "", "export", dest, "--json")
	if ev := events(t, out); len(ev["exported"]) != 3 || len(ev["failed"]) != 0 {
		t.Fatalf("an export into a folder holding another file of a photo's name: %s", out)
	}
	exported("the first export")
	out = rig.mustRun(0, "", "export", dest, "--json")
	if ev := events(t, out); len(ev["unchanged"]) != 3 || ev["done"][0]["done"] != float64(0) {
		t.Fatalf("a second export: %s", out)
	}
	exported("the second export")
}

// TestClientExportWritesADuplicateWhoseFirstCopyFailed: the same video in
// two albums, whose first copy fails (its blob damaged on the server), is
// written from the second album's own blob, not linked to what is at the
// first copy's name (here a file of the person's, kept as it was).
func TestClientExportWritesADuplicateWhoseFirstCopyFailed(t *testing.T) {
	rig := newClientRig(t)
	if _, local := rig.ts.Blobs.(*blobs.Dir); !local {
		t.Skip("on S3 there is no blob file to damage")
	}
	noise := make([]byte, 40_000) // over --inline-max: a blob file
	rand.Read(noise)
	clip := append([]byte("not a real video "), noise...)
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "duplicate@example.org", "--password-stdin")
	rig.mustRun(0, "", "sync", photoFolder(t, "First", map[string][]byte{"clip.mp4": clip}))
	// The first album's copy alone is damaged: the second's is sealed
	// under another key, a blob of its own. Albums are listed oldest
	// first, so the second is made a minute later: the first's copy is
	// the one downloaded, the second's the one linked to it.
	if !flipOneBlobFile(t, rig.ts.Dir, 40_000) {
		t.Fatal("no blob file of the video found to damage")
	}
	rig.ts.Clock.Advance(time.Minute)
	rig.mustRun(0, "", "sync", photoFolder(t, "Second", map[string][]byte{"clip.mp4": clip}))

	dest := filepath.Join(t.TempDir(), "export")
	if err := os.MkdirAll(filepath.Join(dest, "First"), 0o755); err != nil {
		t.Fatal(err)
	}
	mine := []byte("the person's own clip.mp4")
	if err := os.WriteFile(filepath.Join(dest, "First", "clip.mp4"), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := rig.run("", "export", dest, "--json")
	if ev := events(t, out); code != 1 || len(ev["failed"]) != 1 || len(ev["exported"]) != 1 ||
		!strings.Contains(fmt.Sprint(ev["failed"][0]["error"]), "clip.mp4 in album First") {
		t.Fatalf("an export whose first copy of a video fails: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if got, err := os.ReadFile(filepath.Join(dest, "Second", "clip.mp4")); err != nil || !bytes.Equal(got, clip) {
		t.Fatalf("the second album's copy: %v, %d bytes; want the video byte for byte", err, len(got))
	}
	if got, err := os.ReadFile(filepath.Join(dest, "First", "clip.mp4")); err != nil || !bytes.Equal(got, mine) {
		t.Fatalf("the file at the first copy's name: %v, %d bytes; want its %d bytes kept byte for byte", err, len(got), len(mine))
	}
}

// TestClientSessionEnds: an expired access token is refreshed and the
// refreshed pair kept; a session past its refresh lifetime, and one ended
// from another device (a password change there), exit 2 saying to sign in
// again; on an account with a second factor, a sign-in without the code
// and one with a wrong code exit 2 saying which, and the right code signs
// in.
func TestClientSessionEnds(t *testing.T) {
	rig := newClientRig(t)
	const email = "session@example.org"
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", email, "--password-stdin")
	session := func() *library.Session {
		t.Helper()
		p, err := library.OpenProfile(rig.profile)
		if err != nil {
			t.Fatal(err)
		}
		s, err := p.Session()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	signedOut := func(what string) {
		t.Helper()
		_, errOut, code := rig.run("", "albums")
		if code != 2 || !strings.Contains(errOut, "the session has ended") || !strings.Contains(errOut, "run sealbox client login") {
			t.Fatalf("%s: exit %d, %s", what, code, errOut)
		}
	}

	before := session()
	rig.ts.Clock.Advance(16 * time.Minute)
	rig.mustRun(0, "", "albums")
	if after := session(); after.Tokens.Access == before.Tokens.Access || after.Tokens.Refresh == before.Tokens.Refresh {
		t.Fatal("the refreshed token pair was not kept in the profile")
	}
	rig.ts.Clock.Advance(31 * 24 * time.Hour)
	signedOut("a session past its refresh lifetime")

	// A password change on another device ends this device's session.
	rig.mustRun(0, "correct horse battery\n", "login", rig.url, "--email", email, "--password-stdin")
	first := rig.profile
	rig.profile = filepath.Join(t.TempDir(), "other device")
	rig.mustRun(0, "correct horse battery\n", "login", rig.url, "--email", email, "--password-stdin")
	rig.mustRun(0, "correct horse battery\nnew horse battery\n", "passwd", "--password-stdin")
	rig.profile = first
	signedOut("a session ended from another device")

	// A second factor, enrolled through the API with this device's session.
	rig.mustRun(0, "new horse battery\n", "login", rig.url, "--email", email, "--password-stdin")
	api := servertest.Client{BaseURL: rig.ts.URL()}
	access := session().Tokens.Access
	uri := api.Do(t, servertest.Req{Method: "POST", Path: "/v1/auth/totp/enroll", Token: access}).WantStatus(t, 200).JSON(t)["provisioning_uri"].(string)
	codeAt := func(at time.Time) string {
		c, err := totpCode(uri, at)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	api.Do(t, servertest.Req{Method: "POST", Path: "/v1/auth/totp/verify-enrollment", Token: access,
		Body: map[string]any{"totp_code": codeAt(rig.ts.Clock.Now())}}).WantStatus(t, 204)
	rig.ts.Clock.Advance(time.Minute) // the confirming code's step is spent
	if _, errOut, code := rig.run("new horse battery\n", "login", rig.url, "--email", email, "--password-stdin"); code != 2 || !strings.Contains(errOut, "give it with --code") {
		t.Fatalf("a sign-in without the code: exit %d, %s", code, errOut)
	}
	now := rig.ts.Clock.Now()
	valid := map[string]bool{}
	for _, d := range []time.Duration{-time.Minute, -30 * time.Second, 0, 30 * time.Second, time.Minute} {
		valid[codeAt(now.Add(d))] = true
	}
	wrong := "000000"
	for i := 1; valid[wrong]; i++ {
		wrong = fmt.Sprintf("%06d", i)
	}
	if _, errOut, code := rig.run("new horse battery\n", "login", rig.url, "--email", email, "--password-stdin", "--code", wrong); code != 2 || !strings.Contains(errOut, "the code is wrong or out of date") {
		t.Fatalf("a sign-in with a wrong code: exit %d, %s", code, errOut)
	}
	rig.mustRun(0, "new horse battery\n", "login", rig.url, "--email", email, "--password-stdin", "--code", codeAt(now))
	rig.mustRun(0, "", "albums")
}

// TestClientSyncPairsAndSidecars: a Live Photo (a HEIC and a MOV of one
// base name) and a RAW+JPEG pair are one asset each, with two originals,
// and their XMP sidecars travel with them: ls shows one line each, the
// Live Photo's capture time is its sidecar's, a second sync reads neither
// again, and an export gives back every file byte for byte under its own
// name.
func TestClientSyncPairsAndSidecars(t *testing.T) {
	rig := newClientRig(t)
	video := make([]byte, 40_000)
	rand.Read(video)
	raw := make([]byte, 30_000)
	rand.Read(raw)
	files := map[string][]byte{
		"IMG_0001.HEIC": []byte("not a real HEIC, kept as it is"),
		"IMG_0001.MOV":  video,
		"IMG_0001.xmp": []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
			`<rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:DateTimeOriginal="2021-05-06T07:08:09+02:00"/></rdf:RDF></x:xmpmeta>`),
		"IMG_0002.JPG":     mediatest.JPEG(40, 30, 7, mediatest.EXIF{DateTimeOriginal: "2022:03:04 05:06:07"}),
		"IMG_0002.CR2":     raw,
		"IMG_0002.CR2.xmp": []byte("<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"/>\n"),
		"single.jpg":       mediatest.JPEG(16, 16, 9, mediatest.EXIF{}),
	}
	folder := photoFolder(t, "Pairs", files)
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "pairs@example.org", "--password-stdin")
	out := rig.mustRun(0, "", "sync", folder, "--json")
	ev := events(t, out)
	if len(ev["uploaded"]) != 3 || ev["done"][0]["bytes"] != float64(len(files["IMG_0001.HEIC"])+len(video)+len(files["IMG_0002.JPG"])+len(raw)+len(files["single.jpg"])) {
		t.Fatalf("a sync of a Live Photo, a RAW+JPEG pair and a photo: %s", out)
	}
	if ev := events(t, rig.mustRun(0, "", "sync", folder, "--json")); len(ev["unchanged"]) != 3 || len(ev["uploaded"]) != 0 {
		t.Fatalf("a second sync: %v", ev)
	}

	type listed struct {
		Name, Companion, Taken string
		Sidecars               []string
	}
	var got []listed
	for _, line := range strings.Split(strings.TrimSpace(rig.mustRun(0, "", "ls", "Pairs", "--json")), "\n") {
		var l listed
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	slices.SortFunc(got, func(a, b listed) int { return strings.Compare(a.Name, b.Name) })
	want := []listed{
		{Name: "IMG_0001.HEIC", Companion: "IMG_0001.MOV", Taken: "2021-05-06T07:08:09", Sidecars: []string{"IMG_0001.xmp"}},
		{Name: "IMG_0002.JPG", Companion: "IMG_0002.CR2", Taken: "2022-03-04T05:06:07", Sidecars: []string{"IMG_0002.CR2.xmp"}},
		{Name: "single.jpg", Sidecars: []string{}},
	}
	if len(got) == 3 {
		got[2].Taken = "" // the file's own time
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ls: %+v\nwant %+v", got, want)
	}
	if out := rig.mustRun(0, "", "ls", "Pairs"); !strings.Contains(out, "IMG_0001.HEIC + IMG_0001.MOV") || strings.Count(strings.TrimSpace(out), "\n") != 2 {
		t.Fatalf("ls as text, one line an asset: %s", out)
	}

	dest := filepath.Join(t.TempDir(), "export")
	rig.mustRun(0, "", "export", dest)
	entries, err := os.ReadDir(filepath.Join(dest, "Pairs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(files) {
		t.Errorf("the export holds %d files, want %d", len(entries), len(files))
	}
	for name, b := range files {
		if got, err := os.ReadFile(filepath.Join(dest, "Pairs", name)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("exported %s: %v, not byte-identical", name, err)
		}
	}
	if ev := events(t, rig.mustRun(0, "", "export", dest, "--json")); len(ev["unchanged"]) != 3 {
		t.Fatalf("a second export: %v", ev)
	}
}

// TestClientSyncSendsEditedSidecars: a sidecar edited after its photo was
// synced (a rating, a corrected capture time) is sent again as a replace
// of the asset's metadata, its original not uploaded again: the sync says
// "updated" and counts it, sends one op and no upload session, blob or
// tus request, and an export returns the photo byte for byte with the new
// sidecar, its capture time the new sidecar's. A dry run says
// "would-update" and sends nothing. A sidecar removed is removed from the
// asset, and its time with it; a sync with nothing changed sends no op. A
// second device, which knows no head of the asset, reads it from the
// album's list and sends its sidecar; the first device's replace on the
// head it wrote is then refused as stale (409), and rebuilt on the new
// head. No request holds the sidecar's text.
func TestClientSyncSendsEditedSidecars(t *testing.T) {
	rig := newClientRig(t)
	xmp := func(date, rating string) []byte {
		return []byte(`<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">` +
			`<rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" xmlns:xmp="http://ns.adobe.com/xap/1.0/" exif:DateTimeOriginal="` + date +
			`" xmp:Rating="` + rating + `" xmp:Label="` + plaintextMarker + `"/></rdf:RDF></x:xmpmeta>`)
	}
	photo := mediatest.JPEG(40, 30, 3, mediatest.EXIF{}) // no capture time of its own: the sidecar's is taken
	folder := photoFolder(t, "Edits", map[string][]byte{"IMG_0001.JPG": photo, "IMG_0001.JPG.xmp": xmp("2021-05-06T07:08:09+02:00", "1")})
	sidecar := filepath.Join(folder, "IMG_0001.JPG.xmp")
	edit := func(b []byte, at time.Time) {
		t.Helper()
		if err := os.WriteFile(sidecar, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(sidecar, at, at); err != nil {
			t.Fatal(err)
		}
	}
	// sent runs a sync and returns its output and the paths it requested.
	sent := func(args ...string) (string, []string) {
		t.Helper()
		rig.mu.Lock()
		from := len(rig.bodies)
		rig.mu.Unlock()
		out := rig.mustRun(0, "", append([]string{"sync", folder}, args...)...)
		rig.mu.Lock()
		defer rig.mu.Unlock()
		var paths []string
		for _, b := range rig.bodies[from:] {
			if bytes.Contains(b, []byte(plaintextMarker)) {
				t.Errorf("a request holds the sidecar's text: %.200s", b)
			}
			paths = append(paths, strings.SplitN(string(b), "\n", 2)[0])
		}
		return out, paths
	}
	counts := func(paths []string) (ops, uploads int) {
		for _, p := range paths {
			if strings.HasSuffix(p, "/ops") {
				ops++
			}
			if strings.Contains(p, "/uploads") {
				uploads++ // an upload session, a blob PUT or a tus transfer
			}
		}
		return ops, uploads
	}
	// exported exports into a new folder and returns its files.
	exported := func() map[string][]byte {
		t.Helper()
		dest := filepath.Join(t.TempDir(), "export")
		rig.mustRun(0, "", "export", dest)
		entries, err := os.ReadDir(filepath.Join(dest, "Edits"))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]byte{}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dest, "Edits", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			got[e.Name()] = b
		}
		return got
	}
	taken := func() string {
		t.Helper()
		var l struct{ Taken string }
		if err := json.Unmarshal([]byte(rig.mustRun(0, "", "ls", "Edits", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		return l.Taken
	}

	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "edits@example.org", "--password-stdin")
	if ev := events(t, rig.mustRun(0, "", "sync", folder, "--json")); len(ev["uploaded"]) != 1 {
		t.Fatalf("the first sync: %v", ev)
	}
	if got := taken(); got != "2021-05-06T07:08:09" {
		t.Fatalf("taken %q after the first sync, want the sidecar's", got)
	}

	// The sidecar edited: a new rating and a corrected time.
	edited := xmp("2020-01-02T03:04:05+01:00", "5")
	edit(edited, time.Now().Add(time.Minute))
	out, paths := sent("--dry-run", "--json")
	if ev := events(t, out); len(ev["would-update"]) != 1 || ev["done"][0]["updated"] != float64(1) {
		t.Fatalf("a dry run after the sidecar's edit: %s", out)
	}
	if ops, uploads := counts(paths); ops != 0 || uploads != 0 {
		t.Fatalf("a dry run sent %d ops and %d upload requests: %v", ops, uploads, paths)
	}
	out, paths = sent()
	if want := "updated   " + filepath.Join(folder, "IMG_0001.JPG") + "\nuploaded 0 (0 B), 1 updated, 0 unchanged, 0 already there, 0 failed, 0 skipped, in "; !strings.HasPrefix(out, want) {
		t.Fatalf("the sync after the sidecar's edit:\n%s\nwant it to begin\n%s", out, want)
	}
	if ops, uploads := counts(paths); ops != 1 || uploads != 0 {
		t.Fatalf("the sync after the sidecar's edit sent %d ops and %d upload requests, want 1 and 0: %v", ops, uploads, paths)
	}
	if got := exported(); len(got) != 2 || !bytes.Equal(got["IMG_0001.JPG"], photo) || !bytes.Equal(got["IMG_0001.JPG.xmp"], edited) {
		t.Fatalf("the export after the edit holds %d files; the photo byte for byte %v, the edited sidecar %v",
			len(got), bytes.Equal(got["IMG_0001.JPG"], photo), bytes.Equal(got["IMG_0001.JPG.xmp"], edited))
	}
	if got := taken(); got != "2020-01-02T03:04:05" {
		t.Fatalf("taken %q after the edit, want the edited sidecar's", got)
	}

	// The sidecar removed: the asset has none, nor its time.
	if err := os.Remove(sidecar); err != nil {
		t.Fatal(err)
	}
	out, paths = sent("--json")
	if ev := events(t, out); len(ev["updated"]) != 1 || len(ev["uploaded"]) != 0 || ev["done"][0]["updated"] != float64(1) {
		t.Fatalf("the sync after the sidecar's removal: %s", out)
	}
	if ops, uploads := counts(paths); ops != 1 || uploads != 0 {
		t.Fatalf("the sync after the sidecar's removal sent %d ops and %d upload requests, want 1 and 0: %v", ops, uploads, paths)
	}
	if got := exported(); len(got) != 1 || !bytes.Equal(got["IMG_0001.JPG"], photo) {
		t.Fatalf("the export after the sidecar's removal: %d files, want the photo alone", len(got))
	}
	if got := taken(); strings.HasPrefix(got, "2020-01-02") || strings.HasPrefix(got, "2021-05-06") {
		t.Fatalf("taken %q after the sidecar's removal, want the file's own time", got)
	}

	// Nothing changed: nothing sent.
	out, paths = sent("--json")
	if ev := events(t, out); len(ev["unchanged"]) != 1 || len(ev["updated"]) != 0 || ev["done"][0]["updated"] != float64(0) {
		t.Fatalf("a sync with nothing changed: %s", out)
	}
	if ops, uploads := counts(paths); ops != 0 || uploads != 0 {
		t.Fatalf("a sync with nothing changed sent %d ops and %d upload requests: %v", ops, uploads, paths)
	}

	// A second device, which knows no head of the asset, sends a sidecar
	// put back: it reads the head from the album's list. The first
	// device's head is then stale: its replace of the next edit loses the
	// race (409) and is rebuilt on the second device's head.
	first := rig.profile
	rig.profile = filepath.Join(t.TempDir(), "other device")
	rig.mustRun(0, "correct horse battery\n", "login", rig.url, "--email", "edits@example.org", "--password-stdin")
	edit(xmp("2019-01-01T00:00:00Z", "2"), time.Now().Add(2*time.Minute))
	if ev := events(t, rig.mustRun(0, "", "sync", folder, "--json")); len(ev["known"]) != 1 {
		t.Fatalf("the second device's first sync: %v", ev)
	}
	out, paths = sent("--json")
	if ev := events(t, out); len(ev["updated"]) != 1 {
		t.Fatalf("the second device's sync of the sidecar put back: %s", out)
	}
	if ops, _ := counts(paths); ops != 1 {
		t.Fatalf("the second device sent %d ops, want 1: %v", ops, paths)
	}
	rig.profile = first
	again := xmp("2018-01-01T00:00:00Z", "3")
	edit(again, time.Now().Add(3*time.Minute))
	out, paths = sent("--json")
	if ev := events(t, out); len(ev["updated"]) != 1 || len(ev["failed"]) != 0 {
		t.Fatalf("the first device's sync on a head it did not write: %s", out)
	}
	if ops, uploads := counts(paths); ops != 2 || uploads != 0 {
		t.Fatalf("the first device sent %d ops and %d upload requests, want 2 (one refused as stale) and 0: %v", ops, uploads, paths)
	}
	if got := exported(); len(got) != 2 || !bytes.Equal(got["IMG_0001.JPG"], photo) || !bytes.Equal(got["IMG_0001.JPG.xmp"], again) {
		t.Fatalf("the export after the race holds %d files; the photo byte for byte %v, the last sidecar %v",
			len(got), bytes.Equal(got["IMG_0001.JPG"], photo), bytes.Equal(got["IMG_0001.JPG.xmp"], again))
	}
	if got := taken(); got != "2018-01-01T00:00:00" {
		t.Fatalf("taken %q after the race, want the last sidecar's", got)
	}
}

// TestClientSyncLeavesATrashedPhotosSidecar: a photo deleted on the server
// (in the trash) whose sidecar is then edited here takes no replace: the
// replace built on the head this device wrote is refused as stale, the
// album's list shows the photo deleted, and the sync reports its file
// unchanged (exit 0) and sends nothing on the next run.
func TestClientSyncLeavesATrashedPhotosSidecar(t *testing.T) {
	rig := newClientRig(t)
	folder := photoFolder(t, "Trash", map[string][]byte{
		"IMG_0001.JPG":     mediatest.JPEG(40, 30, 4, mediatest.EXIF{}),
		"IMG_0001.JPG.xmp": []byte("<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"/>\n"),
	})
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "trash@example.org", "--password-stdin")
	rig.mustRun(0, "", "sync", folder)

	p, err := library.OpenProfile(rig.profile)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := p.Session()
	if err != nil {
		t.Fatal(err)
	}
	api := servertest.Client{BaseURL: rig.ts.URL()}
	var albums struct {
		Albums []client.Album `json:"albums"`
	}
	if err := json.Unmarshal(api.Do(t, servertest.Req{Method: "GET", Path: "/v1/albums", Token: sess.Tokens.Access}).WantStatus(t, 200).Body, &albums); err != nil || len(albums.Albums) != 1 {
		t.Fatalf("albums: %v %v", albums, err)
	}
	album := albums.Albums[0]
	var assets client.AssetPage
	if err := json.Unmarshal(api.Do(t, servertest.Req{Method: "GET", Path: "/v1/albums/" + album.AlbumID + "/assets", Token: sess.Tokens.Access}).WantStatus(t, 200).Body, &assets); err != nil || len(assets.Assets) != 1 {
		t.Fatalf("assets: %v %v", assets, err)
	}
	asset := assets.Assets[0]
	api.Do(t, servertest.Req{Method: "POST", Path: "/v1/albums/" + album.AlbumID + "/tombstones", Token: sess.Tokens.Access, Body: map[string]any{
		"tombstone_envelope": map[string]any{
			"crypto_suite_id": 1, "protocol_version": album.ProtocolVersion, "album_id": album.AlbumID, "file_id": asset.AssetID,
			"created_by_user": sess.UserID, "created_by_device": sess.DeviceID, "client_version": "test/1",
			"timestamp": time.Now().UTC().Format(time.RFC3339), "prior_provenance_hash": asset.ManifestHash,
		},
		"tombstone_cbor": base64.StdEncoding.EncodeToString([]byte("a tombstone the server does not parse")),
	}}).WantStatus(t, 200)

	sidecar := filepath.Join(folder, "IMG_0001.JPG.xmp")
	if err := os.WriteFile(sidecar, []byte("<x:xmpmeta xmlns:x=\"adobe:ns:meta/\"><!-- rated --></x:xmpmeta>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(sidecar, later, later); err != nil {
		t.Fatal(err)
	}
	for i, wantOps := range []int{1, 0} {
		rig.mu.Lock()
		from := len(rig.bodies)
		rig.mu.Unlock()
		out := rig.mustRun(0, "", "sync", folder, "--json")
		if ev := events(t, out); len(ev["unchanged"]) != 1 || len(ev["updated"]) != 0 || len(ev["failed"]) != 0 {
			t.Fatalf("sync %d after the photo went to the trash: %s", i+1, out)
		}
		rig.mu.Lock()
		ops := 0
		for _, b := range rig.bodies[from:] {
			path := strings.SplitN(string(b), "\n", 2)[0]
			if strings.HasSuffix(path, "/ops") || strings.Contains(path, "/uploads") {
				ops++
			}
		}
		rig.mu.Unlock()
		if ops != wantOps {
			t.Fatalf("sync %d after the photo went to the trash sent %d ops or uploads, want %d", i+1, ops, wantOps)
		}
	}
}

// openPTY opens a pseudo-terminal pair with the standard library alone
// (Linux's /dev/ptmx): the terminal side a child writes to, and the side
// the test reads what it shows from. The terminal is 120 columns wide.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no pseudo-terminal: %v", err)
		}
		t.Skipf("no pseudo-terminal: %v", err)
	}
	ioctl := func(f *os.File, req uintptr, arg unsafe.Pointer) {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
			t.Fatalf("ioctl %#x: %v", req, errno)
		}
	}
	var unlock int32
	ioctl(ptmx, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	var n uint32
	ioctl(ptmx, syscall.TIOCGPTN, unsafe.Pointer(&n))
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	size := struct{ rows, cols, x, y uint16 }{40, 120, 0, 0}
	ioctl(pts, syscall.TIOCSWINSZ, unsafe.Pointer(&size))
	t.Cleanup(func() { ptmx.Close(); pts.Close() })
	return pts, ptmx
}

// TestClientSyncProgress: on a terminal, sync shows a progress bar with the
// files and bytes done of the run's, the rate and the time left; without
// one, a line a file and no bar.
func TestClientSyncProgress(t *testing.T) {
	rig := newClientRig(t)
	files := map[string][]byte{}
	for i := range 6 {
		b := make([]byte, 1<<20)
		rand.Read(b)
		files["clip"+itoa(i)+".mp4"] = b
	}
	folder := photoFolder(t, "Progress", files)
	rig.mustRun(0, "correct horse battery\ncorrect horse battery\n", "signup", rig.url, "--email", "progress@example.org", "--password-stdin")

	term, screen := openPTY(t)
	// Paced to 2 MiB/s, the run lasts about three seconds: the bar is
	// drawn many times over (every 100 ms at most).
	cmd := exec.Command(rig.bin, "client", "sync", folder, "--limit-rate", "2MiB", "--profile", rig.profile)
	cmd.Env = serveEnv()
	cmd.Stdout, cmd.Stderr = term, term
	var shown bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		io.Copy(&shown, screen) // ends with EIO once the child and the test closed the terminal side
	}()
	if err := cmd.Run(); err != nil {
		t.Fatalf("sync on a terminal: %v\n%s", err, shown.String())
	}
	term.Close()
	<-read
	out := shown.String()
	for what, re := range map[string]string{
		"files done of the run's": `[1-5]/6 files`,
		"bytes done of the run's": `\([0-9.]+/6\.[0-9]+ MB`,
		"the rate":                `[0-9.]+ [kM]B/s`,
		"the time left":           `\[[0-9]+s:[0-9]+s\]`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the terminal shows no %s (%s):\n%q", what, re, out)
		}
	}
	if !strings.Contains(out, "uploaded 6 (6 MiB)") {
		t.Errorf("the terminal shows no summary:\n%q", out)
	}

	// Without a terminal: a line a file, and no bar. A new file is
	// uploaded; the others, touched, are read again and found known.
	os.WriteFile(filepath.Join(folder, "late.mp4"), []byte("one more"), 0o644)
	for name := range files {
		os.Chtimes(filepath.Join(folder, name), time.Now(), time.Now().Add(time.Hour))
	}
	out, errOut, code := rig.run("", "sync", folder)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(lines[:len(lines)-1])
	want := []string{}
	for i := range 6 {
		want = append(want, "known     "+filepath.Join(folder, "clip"+itoa(i)+".mp4"))
	}
	want = append(want, "uploaded  "+filepath.Join(folder, "late.mp4"))
	if code != 0 || len(lines) != 8 || !slices.Equal(lines[:7], want) || !strings.HasPrefix(lines[7], "uploaded 1 (8 B), 0 updated, 0 unchanged, 6 already there") || errOut != "" {
		t.Fatalf("sync without a terminal: exit %d\nstdout: %q\nstderr: %q", code, out, errOut)
	}
}
