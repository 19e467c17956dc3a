package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
	"sealbox/server/witness/witnesstest"
)

// devicesOf runs devices --json on a profile.
func devicesOf(t *testing.T, rig *clientRig, profile string) []client.Session {
	t.Helper()
	out, errOut, code := rig.runAs(profile, "", "devices", "--json")
	if code != 0 {
		t.Fatalf("devices: exit %d: %s", code, errOut)
	}
	var got struct {
		Sessions []client.Session `json:"sessions"`
		Cohorts  []client.Cohort  `json:"cohorts"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("devices --json: %v: %s", err, out)
	}
	return got.Sessions
}

// TestClientDevicesAndSignOutEverywhere: devices lists both devices'
// sessions, marking the current one; devices remove ends another device's
// session, which then says so; sign-out-everywhere ends both, proven with
// the identity key, and both devices then say they are signed out.
func TestClientDevicesAndSignOutEverywhere(t *testing.T) {
	rig := newClientRig(t)
	rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin")
	rig.ts.SignCheckpoint(t)
	deviceB := filepath.Join(t.TempDir(), "phone")
	login := func() {
		t.Helper()
		if _, errOut, code := rig.runAs(deviceB, linkPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin"); code != 0 {
			t.Fatalf("login on device B: exit %d: %s", code, errOut)
		}
	}
	login()

	// Both signed in at the same instant of the server's clock: the list's
	// order is then the session ids', so each is found by its mark.
	split := func(list []client.Session) (current, other client.Session) {
		t.Helper()
		if len(list) != 2 || list[0].Current == list[1].Current {
			t.Fatalf("a list of two sessions, one current: %+v", list)
		}
		if list[0].Current {
			return list[0], list[1]
		}
		return list[1], list[0]
	}
	sessions := devicesOf(t, rig, rig.profile)
	mine, theirs := split(sessions)
	other := theirs.SessionID
	if current, _ := split(devicesOf(t, rig, deviceB)); current.SessionID != other {
		t.Fatalf("device B's current session is %s, not %s", current.SessionID, other)
	}
	for _, s := range sessions {
		if !strings.HasPrefix(s.UserAgent, "sealbox-client") || s.CreatedAt == "" || s.LastActiveAt == "" {
			t.Fatalf("a session without its user agent or times: %+v", s)
		}
	}
	// A login names its device (signup's register has no device_id).
	var b struct {
		DeviceID string `json:"device_id"`
	}
	if raw, err := os.ReadFile(filepath.Join(deviceB, "session.json")); err != nil || json.Unmarshal(raw, &b) != nil || b.DeviceID == "" || theirs.DeviceID != b.DeviceID {
		t.Fatalf("device B's session lists device %q, its profile %q (%v)", theirs.DeviceID, b.DeviceID, err)
	}
	out := rig.mustRun(0, "", "devices")
	if !strings.Contains(out, "SESSION") || !strings.Contains(out, mine.SessionID) || !strings.Contains(out, other) ||
		strings.Count(out, "this device") != 2 || !strings.Contains(out, b.DeviceID) ||
		!strings.Contains(out, "Devices holding the keys (directory version 1, proven in the transparency log):") {
		t.Fatalf("devices as text:\n%s", out)
	}

	// Removing: a malformed id and an unknown one are refused.
	_, errOut, code := rig.run("", "devices", "remove", "not-a-uuid")
	if code != 2 || !strings.Contains(errOut, "the server refused: session_id must be a UUID (field session_id, HTTP 400)") {
		t.Fatalf("devices remove of a malformed id: exit %d: %s", code, errOut)
	}
	_, errOut, code = rig.run("", "devices", "remove", "00000000-0000-4000-8000-000000000000")
	if code != 2 || !strings.Contains(errOut, "the server refused: session not found (HTTP 404)") {
		t.Fatalf("devices remove of an unknown session: exit %d: %s", code, errOut)
	}
	if out := rig.mustRun(0, "", "devices", "remove", other); strings.TrimSpace(out) != "1 session ended." {
		t.Fatalf("devices remove: %s", out)
	}
	_, errOut, code = rig.runAs(deviceB, "", "status")
	if code != 2 || !strings.Contains(errOut, "the session has ended; sign in again") || !strings.Contains(errOut, "run sealbox client login") {
		t.Fatalf("status on a removed device: exit %d: %s", code, errOut)
	}
	if got := devicesOf(t, rig, rig.profile); len(got) != 1 {
		t.Fatalf("after the removal: %+v", got)
	}

	login()
	out = rig.mustRun(0, "", "sign-out-everywhere", "--json")
	if strings.TrimSpace(out) != `{"revoked":2}` {
		t.Fatalf("sign-out-everywhere: %s", out)
	}
	_, errOut, code = rig.run("", "status")
	if code != 2 || !strings.Contains(errOut, "not signed in on this device") {
		t.Fatalf("status on the device that signed out everywhere: exit %d: %s", code, errOut)
	}
	_, errOut, code = rig.runAs(deviceB, "", "devices")
	if code != 2 || !strings.Contains(errOut, "the session has ended; sign in again") {
		t.Fatalf("devices on the other device: exit %d: %s", code, errOut)
	}
	// Signing in again works as before.
	login()
	if got := devicesOf(t, rig, deviceB); len(got) != 1 || !got[0].Current {
		t.Fatalf("after signing in again: %+v", got)
	}
}

// TestClientDirectoryInTheLog: a device uses the directory only once its
// record is proven in the transparency log: a directory served with
// another record's index (so, without its own entry) is refused with the
// reason, and so is a log that went backwards from the checkpoint the
// device kept.
func TestClientDirectoryInTheLog(t *testing.T) {
	rig := newClientRig(t)
	rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin")
	rig.ts.SignCheckpoint(t)
	first := get(t, rig.url+"/v1/transparency/checkpoint")

	var mode atomic.Value
	mode.Store("")
	target, _ := url.Parse(rig.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		switch m := mode.Load().(string); {
		case m == "index" && strings.HasPrefix(resp.Request.URL.Path, "/v1/auth/devices/directory/"):
			resp.Header.Set("X-Transparency-Index", "1")
		case m == "old-checkpoint" && resp.Request.URL.Path == "/v1/transparency/checkpoint":
			resp.Body = io.NopCloser(bytes.NewReader(first))
			resp.ContentLength = int64(len(first))
			resp.Header.Set("Content-Length", strconv.Itoa(len(first)))
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	laptop := filepath.Join(t.TempDir(), "laptop")
	if _, errOut, code := rig.runAs(laptop, linkPassword+"\n", "login", front.URL, "--email", "family@example.org", "--password-stdin"); code != 0 {
		t.Fatalf("login through the proxy: exit %d: %s", code, errOut)
	}
	if out, errOut, code := rig.runAs(laptop, "", "devices"); code != 0 || !strings.Contains(out, "directory version 1, proven in the transparency log") {
		t.Fatalf("devices: exit %d: %s%s", code, out, errOut)
	}
	// Another account's publish is the log's record 1.
	other := filepath.Join(t.TempDir(), "neighbour")
	if _, errOut, code := rig.runAs(other, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "neighbour@example.org", "--password-stdin"); code != 0 {
		t.Fatalf("signup of another account: exit %d: %s", code, errOut)
	}
	rig.ts.SignCheckpoint(t)
	if _, errOut, code := rig.runAs(laptop, "", "devices"); code != 0 {
		t.Fatalf("devices after the log grew: exit %d: %s", code, errOut)
	}

	mode.Store("index")
	_, errOut, code := rig.runAs(laptop, "", "devices")
	if code != 2 || !strings.Contains(errOut, "the directory is refused: INCONSISTENT: the log's record at index 1 is not \"sealbox-directory/v1 ") ||
		!strings.Contains(errOut, "what the server showed is not in its log") {
		t.Fatalf("a directory without its log entry: exit %d: %s", code, errOut)
	}
	mode.Store("old-checkpoint")
	_, errOut, code = rig.runAs(laptop, "", "devices")
	if code != 2 || !strings.Contains(errOut, "the directory is refused: INCONSISTENT: the log went backwards: the server shows 1 records, but this machine saw a checkpoint of 2") {
		t.Fatalf("a log that went backwards: exit %d: %s", code, errOut)
	}
	mode.Store("")
	if _, errOut, code := rig.runAs(laptop, "", "devices"); code != 0 {
		t.Fatalf("devices once the server shows the log again: exit %d: %s", code, errOut)
	}

	// A device given a witness requires its cosignature, which this
	// server's checkpoints do not carry.
	logKey := strings.TrimSpace(string(get(t, rig.url+"/v1/transparency/key")))
	w := witnesstest.Start(t, "witness.example/client", logKey)
	watcher := filepath.Join(t.TempDir(), "watcher")
	_, errOut, code = rig.runAs(watcher, linkPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin", "--witness", "nope")
	if code != 2 || !strings.Contains(errOut, `--witness "nope" is not a cosignature verifier key`) {
		t.Fatalf("login with a malformed witness key: exit %d: %s", code, errOut)
	}
	if _, errOut, code := rig.runAs(watcher, linkPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin", "--witness", w.VerifierKey); code != 0 {
		t.Fatalf("login with a witness: exit %d: %s", code, errOut)
	}
	_, errOut, code = rig.runAs(watcher, "", "devices")
	if code != 2 || !strings.Contains(errOut, "the directory is refused: INCONSISTENT: the checkpoint of 2 records is cosigned by 0 of the witnesses you trust, not the 1 you require") {
		t.Fatalf("devices without the witness's cosignature: exit %d: %s", code, errOut)
	}
}

// TestClientLogTrustIsTheServers: what a device trusts a transparency log
// with is one server's. A refused login keeps nothing of its --witness (the
// login after it, given none, requires no witness), and a profile signed in
// to another server after a logout takes that server's log key afresh, as
// the first server's was taken, instead of refusing its log as another's.
func TestClientLogTrustIsTheServers(t *testing.T) {
	rig := newClientRig(t)
	rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin")
	rig.ts.SignCheckpoint(t)
	proven := func(profile, what string) {
		t.Helper()
		if out, errOut, code := rig.runAs(profile, "", "devices"); code != 0 || !strings.Contains(out, "proven in the transparency log") {
			t.Fatalf("devices %s: exit %d: %s%s", what, code, out, errOut)
		}
	}
	proven(rig.profile, "after signup")

	logKey := strings.TrimSpace(string(get(t, rig.url+"/v1/transparency/key")))
	w := witnesstest.Start(t, "witness.example/client", logKey)
	laptop := filepath.Join(t.TempDir(), "laptop")
	_, errOut, code := rig.runAs(laptop, "not the password\n", "login", rig.url, "--email", "family@example.org", "--password-stdin", "--witness", w.VerifierKey)
	if code != 2 || !strings.Contains(errOut, "the email or password is wrong (HTTP 401)") {
		t.Fatalf("login with a wrong password and a witness: exit %d: %s", code, errOut)
	}
	if _, errOut, code := rig.runAs(laptop, linkPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin"); code != 0 {
		t.Fatalf("login: exit %d: %s", code, errOut)
	}
	proven(laptop, "after a refused login with a witness, then one without")

	rig.mustRun(0, "", "logout")
	other := newClientRig(t)
	other.profile = rig.profile
	other.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", other.url, "--email", "family@example.org", "--password-stdin")
	other.ts.SignCheckpoint(t)
	proven(rig.profile, "on another server after a logout")
}

// TestClientDirectoryVersionConflict: another device publishes between a
// device's read of the directory and its publish; the publish is refused
// 409, and the device reads the stored directory again, proves it in the
// log and signs its change above it, keeping the other device's entry.
func TestClientDirectoryVersionConflict(t *testing.T) {
	rig := newClientRig(t)
	rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin")
	rig.ts.SignCheckpoint(t)
	keys := readKeys(t, rig.profile)
	var sess struct {
		UserID   string `json:"user_id"`
		DeviceID string `json:"device_id"`
	}
	if raw, err := os.ReadFile(filepath.Join(rig.profile, "session.json")); err != nil || json.Unmarshal(raw, &sess) != nil {
		t.Fatalf("the session: %v", err)
	}
	deviceKey, err := sealed.ParseDeviceKey(keys.Device[:])
	if err != nil {
		t.Fatal(err)
	}
	const other = "6f1c2a3b-0000-4000-8000-00000000000f"
	between, err := sealed.SignDirectory(sealed.Directory{Version: 2, UserID: sess.UserID, Devices: []sealed.DirectoryDevice{
		{DeviceID: sess.DeviceID, PublicKey: deviceKey.PublicKey()}, {DeviceID: other, PublicKey: bytes.Repeat([]byte{7}, 32)}}}, keys.Identity.Identity())
	if err != nil {
		t.Fatal(err)
	}

	target, _ := url.Parse(rig.url)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var injected atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/auth/devices/directory" && injected.CompareAndSwap(false, true) {
			req, _ := http.NewRequest(http.MethodPost, rig.ts.URL()+"/v1/auth/devices/directory", bytes.NewReader(between))
			req.Header.Set("Authorization", r.Header.Get("Authorization"))
			req.Header.Set("Content-Type", "application/cbor")
			req.Header.Set("X-Service-Identity-Key", r.Header.Get("X-Service-Identity-Key"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("the publish in between: %v %v", err, resp)
			}
			resp.Body.Close()
			rig.ts.SignCheckpoint(t)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	phone := filepath.Join(t.TempDir(), "phone")
	a, b, sasA, sasB, _ := linkStart(t, rig, phone, front.URL, false)
	if sasA != sasB {
		t.Fatalf("the devices show %s and %s", sasA, sasB)
	}
	a.say(sasB)
	a.wait(0)
	b.wait(0)
	if !injected.Load() {
		t.Fatal("the linked device published no directory")
	}
	rig.ts.SignCheckpoint(t)
	var listed struct {
		Directory struct {
			Version uint64 `json:"version"`
			Devices []struct {
				DeviceID string `json:"device_id"`
			} `json:"devices"`
		} `json:"directory"`
	}
	if err := json.Unmarshal([]byte(rig.mustRun(0, "", "devices", "--json")), &listed); err != nil || listed.Directory.Version != 3 ||
		len(listed.Directory.Devices) != 3 || listed.Directory.Devices[1].DeviceID != other {
		t.Fatalf("the directory after the conflict: %+v (%v)", listed.Directory, err)
	}
}
