package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestCrashBetweenTusCompletionSteps kills the binary (SIGKILL) between
// the two steps of a tus completion, after the bytes got the blob's name
// and before the store recorded it, then resumes the transfer as a tus
// client does (HEAD, PATCH the rest from the offset it answers): the upload
// completes, the blob reads back byte-identical through a share, and
// `sealbox check --deep` passes after the crash and at the end. The binary
// is built with -tags crashpoints, whose server kills itself at the step
// SEALBOXTEST_CRASH_AT names; the production binary has no such hook.
func TestCrashBetweenTusCompletionSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and crashes it")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rig := newCrashRig(t, buildBinary(t, "crashpoints"), t.TempDir(), seed)
	t.Cleanup(func() {
		if rig.running {
			rig.cmd.Process.Kill()
			<-rig.exited
		}
	})
	rig.extraEnv = []string{"SEALBOXTEST_CRASH_AT=tus-named"}
	rig.start()
	rig.setup()
	rig.login()

	album := randomUUID(rig.rng)
	rig.must("POST", "/v1/albums", rig.ownerTok, "application/json", mustJSON(t, map[string]string{"album_id": album}), http.StatusCreated)
	var up struct {
		UploadID string `json:"upload_id"`
	}
	json.Unmarshal(rig.must("POST", "/v1/albums/"+album+"/uploads", rig.ownerTok, "", nil, http.StatusCreated), &up)
	data := make([]byte, 3<<20+123)
	fillRandom(mrand.New(mrand.NewPCG(seed, 1)), data)
	hash := hashHex(data)
	const acked = 1 << 20

	r := rig.tus("POST", "/v1/uploads/"+up.UploadID+"/tus", nil,
		"Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", "hash "+base64.StdEncoding.EncodeToString([]byte(hash)))
	if r == nil || r.StatusCode != http.StatusCreated {
		t.Fatalf("create the transfer: %v", r)
	}
	loc := r.Header.Get("Location")
	if r := rig.tus("PATCH", loc, data[:acked], "Upload-Offset", "0"); r == nil || r.StatusCode != http.StatusNoContent {
		t.Fatalf("first PATCH: %v", r)
	}
	// The last PATCH names the blob, and the server dies before it records it.
	if r := rig.tus("PATCH", loc, data[acked:], "Upload-Offset", strconv.Itoa(acked)); r != nil {
		t.Fatalf("the last PATCH was answered (%d): the crash point was not reached", r.StatusCode)
	}
	if err := <-rig.exited; err == nil {
		t.Fatal("the server exited cleanly at the crash point")
	}
	rig.running = false
	rig.client.CloseIdleConnections()
	rig.check()

	rig.extraEnv = nil
	rig.start()
	rig.login()
	r = rig.tus("HEAD", loc, nil)
	if r == nil || r.StatusCode != http.StatusOK || r.Header.Get("Upload-Offset") != strconv.Itoa(acked) {
		t.Fatalf("HEAD after the crash: %v, want 200 at offset %d", r, acked)
	}
	// The same bytes, put by a PUT meanwhile, are shared: readers of the
	// blob must see them whole while the transfer resumes beside them.
	rig.must("PUT", "/v1/uploads/"+up.UploadID+"/blobs/"+hash, rig.ownerTok, "application/octet-stream", data, http.StatusCreated)
	rig.ledger.blobs[hash] = data
	verifyBlobs(rig)
	for _, to := range []int{2 * acked, len(data)} {
		from, _ := strconv.Atoi(r.Header.Get("Upload-Offset"))
		r = rig.tus("PATCH", loc, data[from:to], "Upload-Offset", strconv.Itoa(from))
		if r == nil || r.StatusCode != http.StatusNoContent {
			t.Fatalf("resumed PATCH from %d to %d: %v", from, to, r)
		}
		verifyShares(rig)
		if t.Failed() {
			t.Fatalf("the blob changed while its transfer resumed to %d; server log:\n%s", to, rig.log.String())
		}
	}
	rig.stop()
	rig.check()
}

// tus sends one tus request (Tus-Resumable set, headers as name, value
// pairs) with the owner's token and returns its answer, nil when none
// arrived.
func (rig *crashRig) tus(method, path string, body []byte, header ...string) *http.Response {
	req, err := http.NewRequest(method, rig.url+path, bytes.NewReader(body))
	if err != nil {
		rig.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+rig.ownerTok)
	req.Header.Set("Tus-Resumable", "1.0.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/offset+octet-stream")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	r, err := rig.client.Do(req)
	if err != nil {
		return nil
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return r
}
