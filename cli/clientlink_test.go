package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sealbox/cli/library"
	"sealbox/cli/media/mediatest"
	"sealbox/cli/sealed"
)

// liveRun is a client command still running, its standard input open and
// its standard output read line by line, as a person (or a script) between
// two devices uses link and login --code.
type liveRun struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
}

// start runs `sealbox client ARGS --profile profile` without waiting.
func (rig *clientRig) start(profile string, args ...string) *liveRun {
	rig.t.Helper()
	r := &liveRun{t: rig.t, lines: make(chan string, 16)}
	r.cmd = exec.Command(rig.bin, append(append([]string{"client"}, args...), "--profile", profile)...)
	r.cmd.Env = serveEnv()
	r.cmd.Stderr = &r.stderr
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		rig.t.Fatal(err)
	}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		rig.t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		rig.t.Fatal(err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	rig.t.Cleanup(func() { r.cmd.Process.Kill() })
	return r
}

// json waits for the next line of standard output, a JSON object.
func (r *liveRun) json() map[string]any {
	r.t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			r.t.Fatalf("%s ended without the line expected; stderr: %s", r.cmd.Args[2], r.wait(-1))
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			r.t.Fatalf("not a JSON line: %q", line)
		}
		return m
	case <-time.After(2 * time.Minute):
		r.t.Fatalf("%s printed nothing for two minutes", r.cmd.Args[2])
	}
	return nil
}

// say writes a line to standard input.
func (r *liveRun) say(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

// wait waits for the command's end and returns its standard error; want
// >= 0 is the exit status it must have.
func (r *liveRun) wait(want int) string {
	r.t.Helper()
	r.stdin.Close()
	for range r.lines {
	}
	err := r.cmd.Wait()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	if want >= 0 && code != want {
		r.t.Fatalf("%s: exit %d, want %d; stderr: %s", strings.Join(r.cmd.Args[1:3], " "), code, want, r.stderr.String())
	}
	return r.stderr.String()
}

const linkPassword = "correct horse battery"

// linkStart has device A (rig.profile) issue a link code and device B
// (profile) log in with it through serverURL, and returns both runs with
// the comparison string each showed.
func linkStart(t *testing.T, rig *clientRig, profile, serverURL string, fallback bool) (a, b *liveRun, sasA, sasB, code string) {
	t.Helper()
	a = rig.start(rig.profile, "link", "--json")
	offer := a.json()
	code, _ = offer["code"].(string)
	digits, _ := offer["fallback"].(string)
	if !strings.HasPrefix(code, "sbx_en_") || len(digits) != 12 || len(offer) != 2 {
		t.Fatalf("link's first line: %v", offer)
	}
	if fallback {
		code = digits
	}
	b = rig.start(profile, "login", serverURL, "--email", "family@example.org", "--password-stdin", "--code", code, "--json")
	b.say(linkPassword)
	sasB, _ = b.json()["compare"].(string)
	sasA, _ = a.json()["compare"].(string)
	if len(sasA) != 6 || len(sasB) != 6 {
		t.Fatalf("comparison strings %q and %q are not six digits", sasA, sasB)
	}
	return a, b, sasA, sasB, code
}

// TestClientLinkSecondDevice: device A links device B with the code (and
// C with the fallback digits): both show the same comparison string, and
// once it is typed on A, B holds the keys, exports what A synced byte for
// byte. A spent code, a string that differs and a channel that expires
// mid-exchange are each refused on both devices with a clear message, and
// leave the new device without keys or session.
func TestClientLinkSecondDevice(t *testing.T) {
	rig := newClientRig(t)
	folder := filepath.Join(t.TempDir(), "Garden")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"rose.jpg": mediatest.JPEG(40, 30, 3, mediatest.EXIF{}), "tulip.png": mediatest.PNG(12, 9)}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(folder, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin")
	rig.mustRun(0, "", "sync", folder)
	rig.ts.SignCheckpoint(t) // the new device proves the directory in the log before it adds itself

	deviceB := filepath.Join(t.TempDir(), "phone")
	a, b, sasA, sasB, spent := linkStart(t, rig, deviceB, rig.url, false)
	if sasA != sasB {
		t.Fatalf("the devices show %s and %s", sasA, sasB)
	}
	a.say(sasB[:3] + " " + sasB[3:])
	if m := a.json(); m["linked"] != true {
		t.Fatalf("link's last line: %v", m)
	}
	a.wait(0)
	if m := b.json(); m["linked"] != true || m["email"] != "family@example.org" {
		t.Fatalf("login's last line: %v", m)
	}
	b.wait(0)
	keysA, keysB := readKeys(t, rig.profile), readKeys(t, deviceB)
	if keysA.Master != keysB.Master || keysA.Identity != keysB.Identity || keysA.Device == keysB.Device || keysB.Device == [32]byte{} {
		t.Fatal("device B does not hold the account's keys, or holds device A's own key")
	}
	dest := filepath.Join(t.TempDir(), "export")
	if _, errOut, code := rig.runAs(deviceB, "", "export", dest); code != 0 {
		t.Fatalf("export on device B: exit %d: %s", code, errOut)
	}
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(dest, "Garden", name)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s exported on device B: %v", name, err)
		}
	}

	// Device B is in the directory beside A; removing it publishes a
	// directory without it and ends its session.
	rig.ts.SignCheckpoint(t)
	var sessB struct {
		DeviceID string `json:"device_id"`
	}
	if raw, err := os.ReadFile(filepath.Join(deviceB, "session.json")); err != nil || json.Unmarshal(raw, &sessB) != nil {
		t.Fatalf("device B's session: %v", err)
	}
	var listed struct {
		Directory struct {
			Version uint64 `json:"version"`
			Devices []struct {
				DeviceID string `json:"device_id"`
				Current  bool   `json:"current"`
			} `json:"devices"`
		} `json:"directory"`
	}
	if err := json.Unmarshal([]byte(rig.mustRun(0, "", "devices", "--json")), &listed); err != nil || listed.Directory.Version != 2 ||
		len(listed.Directory.Devices) != 2 || !listed.Directory.Devices[0].Current || listed.Directory.Devices[1].DeviceID != sessB.DeviceID {
		t.Fatalf("the directory after the link: %+v (%v)", listed.Directory, err)
	}
	if out := rig.mustRun(0, "", "devices", "remove", sessB.DeviceID); out != "Device "+sessB.DeviceID+" removed from the account's directory.\n1 session ended.\n" {
		t.Fatalf("devices remove of device B: %q", out)
	}
	if _, errOut, code := rig.runAs(deviceB, "", "status"); code != 2 || !strings.Contains(errOut, "the session has ended; sign in again") {
		t.Fatalf("device B after its removal: exit %d: %s", code, errOut)
	}
	rig.ts.SignCheckpoint(t)
	if err := json.Unmarshal([]byte(rig.mustRun(0, "", "devices", "--json")), &listed); err != nil || listed.Directory.Version != 3 || len(listed.Directory.Devices) != 1 {
		t.Fatalf("the directory after the removal: %+v (%v)", listed.Directory, err)
	}

	// Past the freshness window, link asks for the password again.
	rig.ts.Clock.Advance(11 * time.Minute)
	if _, errOut, code := rig.run("", "link", "--json"); code != 2 || !strings.Contains(errOut, "standard input is not a terminal: pass --password-stdin") {
		t.Fatalf("link past the freshness window without the password: exit %d: %s", code, errOut)
	}
	offerOut := rig.start(rig.profile, "link", "--json", "--password-stdin")
	offerOut.say(linkPassword)
	offer := offerOut.json()

	// The code is spent; one never issued is refused alike.
	deviceC := filepath.Join(t.TempDir(), "tablet")
	for _, code := range []string{spent, "000000000000"} {
		_, errOut, exit := rig.runAs(deviceC, linkPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin", "--code", code)
		if exit != 2 || !strings.Contains(errOut, "the link code is unknown, expired or already used: run sealbox client link again") {
			t.Fatalf("login with code %s: exit %d: %s", code, exit, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(deviceC, "session.json")); !os.IsNotExist(err) {
		t.Fatalf("a refused link left a session behind: %v", err)
	}

	// A string that differs: nothing is sent, and both say so.
	c := rig.start(deviceC, "login", rig.url, "--email", "family@example.org", "--password-stdin", "--code", offer["fallback"].(string), "--json")
	c.say(linkPassword)
	sasC := c.json()["compare"].(string)
	if got := offerOut.json()["compare"]; got != sasC {
		t.Fatalf("by the fallback the devices show %v and %s", got, sasC)
	}
	wrong := "000000"
	if sasC == wrong {
		wrong = "111111"
	}
	offerOut.say(wrong)
	if errOut := offerOut.wait(2); !strings.Contains(errOut, "the comparison strings differ: someone may stand between the two devices; no keys were sent") {
		t.Fatalf("link with a string that differs: %s", errOut)
	}
	if errOut := c.wait(2); !strings.Contains(errOut, "the other device declined: the comparison strings differed there, so no keys were sent") {
		t.Fatalf("login when the other device declined: %s", errOut)
	}
	if _, err := os.Stat(filepath.Join(deviceC, "keys.json")); !os.IsNotExist(err) {
		t.Fatalf("a declined link left keys: %v", err)
	}
	if _, errOut, code := rig.runAs(deviceC, "", "status"); code != 2 || !strings.Contains(errOut, "not signed in on this device") {
		t.Fatalf("status after a declined link: exit %d: %s", code, errOut)
	}

	// The channel expires between the comparison and the keys.
	a, c, sasA, sasC, _ = linkStart(t, rig, deviceC, rig.url, false)
	if sasA != sasC {
		t.Fatalf("the devices show %s and %s", sasA, sasC)
	}
	rig.ts.Clock.Advance(15 * time.Minute)
	a.say(sasC)
	gone := "the link channel expired or was closed before the exchange finished; no keys were sent: start again with sealbox client link"
	if errOut := a.wait(2); !strings.Contains(errOut, gone) {
		t.Fatalf("link on an expired channel: %s", errOut)
	}
	if errOut := c.wait(2); !strings.Contains(errOut, gone) {
		t.Fatalf("login on an expired channel: %s", errOut)
	}
	if _, err := os.Stat(filepath.Join(deviceC, "keys.json")); !os.IsNotExist(err) {
		t.Fatalf("an expired link left keys: %v", err)
	}

	// Too many wrong codes from this address: the server refuses the
	// digits, and the device says to give the full code.
	for i := 0; i < 10; i++ {
		resp, err := http.Post(rig.ts.URL()+"/v1/auth/devices/enroll/redeem", "application/json", strings.NewReader(`{"code":"99999999999`+strconv.Itoa(i)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	_, errOut, exit := rig.runAs(deviceC, linkPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin", "--code", "123456789012")
	if exit != 2 || !strings.Contains(errOut, "the server refuses codes for now, after too many wrong ones (the 12 digits first): give the full code (shown beside the QR code) instead") ||
		!strings.Contains(errOut, "HTTP 429") {
		t.Fatalf("the digits after too many wrong codes: exit %d: %s", exit, errOut)
	}
}

// readKeys reads a profile's keys file.
func readKeys(t *testing.T, profile string) library.Keys {
	t.Helper()
	var k library.Keys
	raw, err := os.ReadFile(filepath.Join(profile, "keys.json"))
	if err != nil || json.Unmarshal(raw, &k) != nil {
		t.Fatalf("the keys of %s: %v", profile, err)
	}
	return k
}

// runAs is run with another profile: another device.
func (rig *clientRig) runAs(profile, stdin string, args ...string) (string, string, int) {
	rig.t.Helper()
	saved := rig.profile
	rig.profile = profile
	defer func() { rig.profile = saved }()
	return rig.run(stdin, args...)
}

// tamperProxy stands between the new device and the server, as a server
// that relays would: it swaps the public keys of the link exchange for its
// own (substitute), or damages the sealed keys on their way (corrupt). It
// records whether the sealed keys ever passed.
type tamperProxy struct {
	target     string
	corrupt    bool
	mu         sync.Mutex
	keysPassed bool
}

func (p *tamperProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	relay := strings.HasPrefix(r.URL.Path, "/v1/auth/devices/enroll/channel/")
	if relay && r.Method == http.MethodPost && !p.corrupt {
		var req map[string]string
		if json.Unmarshal(body, &req) == nil {
			req["payload"] = p.rewrite(req["payload"])
			body, _ = json.Marshal(req)
		}
	}
	out, _ := http.NewRequest(r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	out.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if relay && r.Method == http.MethodGet && resp.StatusCode == 200 {
		var d struct {
			Payloads []string `json:"payloads"`
		}
		if json.Unmarshal(answer, &d) == nil {
			for i := range d.Payloads {
				d.Payloads[i] = p.rewrite(d.Payloads[i])
			}
			answer, _ = json.Marshal(d)
		}
	}
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// mallory's keys: one shown to each device.
var mallory = [2][]byte{bytes.Repeat([]byte{0x55}, 32), bytes.Repeat([]byte{0x66}, 32)}

func (p *tamperProxy) rewrite(payload string) string {
	m, err := sealed.ParseLinkMessage(payload)
	if err != nil {
		return payload
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case m.Type == sealed.LinkTypeKeys:
		p.keysPassed = true
		if p.corrupt {
			m.Sealed[len(m.Sealed)-1] ^= 1
		}
	case p.corrupt:
	case m.Type == sealed.LinkTypeCommit:
		m.Commit = sealed.LinkCommitment(mallory[0])
	case m.Type == sealed.LinkTypeReveal:
		m.PublicKey = mallory[0]
	case m.Type == sealed.LinkTypeKey:
		m.PublicKey = mallory[1]
	}
	return m.Marshal()
}

// TestClientLinkTamperedRelay: a relay that substitutes its own keys on
// the way is seen in the comparison strings, which differ, and nothing is
// sent; one that damages the sealed keys is refused by the new device,
// which keeps nothing, and the old device says the new one holds none.
func TestClientLinkTamperedRelay(t *testing.T) {
	rig := newClientRig(t)
	rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin")
	proxy := &tamperProxy{target: rig.url}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	deviceB := filepath.Join(t.TempDir(), "phone")
	a, b, sasA, sasB, _ := linkStart(t, rig, deviceB, front.URL, false)
	if sasA == sasB {
		t.Fatalf("with substituted keys both devices show %s", sasA)
	}
	a.say(sasB) // the person types what the new device shows
	if errOut := a.wait(2); !strings.Contains(errOut, "the comparison strings differ") {
		t.Fatalf("link through a substituting relay: %s", errOut)
	}
	if errOut := b.wait(2); !strings.Contains(errOut, "the other device declined") {
		t.Fatalf("login through a substituting relay: %s", errOut)
	}
	if proxy.keysPassed {
		t.Fatal("the keys were sent although the strings differed")
	}
	rig.mu.Lock()
	for _, body := range rig.bodies {
		if bytes.Contains(body, []byte(`\"type\":\"keys\"`)) {
			t.Fatalf("the server was sent the keys: %s", body)
		}
	}
	rig.mu.Unlock()

	proxy.corrupt = true
	a, b, sasA, sasB, _ = linkStart(t, rig, deviceB, front.URL, true)
	if sasA != sasB {
		t.Fatalf("the devices show %s and %s", sasA, sasB)
	}
	a.say(sasB)
	if errOut := a.wait(2); !strings.Contains(errOut, "the new device could not open the keys it was sent; it holds none") {
		t.Fatalf("link when the keys were damaged: %s", errOut)
	}
	if errOut := b.wait(2); !strings.Contains(errOut, "the keys sent over the link do not open on this device") {
		t.Fatalf("login when the keys were damaged: %s", errOut)
	}
	if !proxy.keysPassed {
		t.Fatal("the sealed keys never passed the proxy")
	}
	if _, err := os.Stat(filepath.Join(deviceB, "keys.json")); !os.IsNotExist(err) {
		t.Fatalf("keys that did not open were kept: %v", err)
	}
}

// TestClientLinkShowsCode: in a terminal's text, link shows the code as a
// QR code, as text and as its 12 digits in groups, and what to run on the
// new device.
func TestClientLinkShowsCode(t *testing.T) {
	rig := newClientRig(t)
	rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin")
	run := rig.start(rig.profile, "link")
	var shown []string
	for line := range run.lines {
		shown = append(shown, line)
		if strings.HasPrefix(line, "The code works once") {
			break
		}
	}
	text := strings.Join(shown, "\n")
	code := regexp.MustCompile(`(?m)^Link code: (sbx_en_[A-Za-z0-9_-]{43})$`).FindStringSubmatch(text)
	if code == nil || !regexp.MustCompile(`(?m)^Or type:   \d{4} \d{4} \d{4}$`).MatchString(text) ||
		!strings.Contains(text, "sealbox client login "+rig.url+" --email family@example.org --code "+code[1]) {
		t.Fatalf("link's text:\n%s", text)
	}
	// The QR code: rows of half blocks above the code's text.
	qr := 0
	for _, line := range shown {
		if strings.ContainsAny(line, "█▀▄") {
			qr++
		}
	}
	if qr < 10 {
		t.Fatalf("no QR code in link's text (%d rows):\n%s", qr, text)
	}
	run.cmd.Process.Kill()
	run.wait(-1)
}
