package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"sealbox/server/servertest"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostileAddr is the loopback address every hostile request comes from.
const hostileAddr = "127.0.0.2"

// attack starts the hostile mix against the server at base; each part
// runs in wg until ctx ends.
// otherAlbum is an album of another account.
func (a *soakAccount) attack(ctx context.Context, t testing.TB, wg *sync.WaitGroup, base, otherAlbum string) {
	t.Helper()
	bigShare := a.bigShare(t, base, 4<<20)
	channel := a.relayChannel(t, base)
	// loop runs fn in n goroutines, each at most once per every: a
	// hostile client is bounded by its own link and CPU too, and the mix
	// stands for one that sends as fast as a phone's uplink allows.
	loop := func(n int, every time.Duration, fn func(i int)) {
		for i := range n {
			wg.Go(func() {
				tick := time.NewTicker(every)
				defer tick.Stop()
				for ctx.Err() == nil {
					fn(i)
					select {
					case <-tick.C:
					case <-ctx.Done():
					}
				}
			})
		}
	}
	client := from(hostileAddr, true)
	send := func(method, url, contentType string, body []byte, timeout time.Duration) {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, method, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+a.access)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	// Logins of unknown accounts whose clients hang up after 50 ms.
	abandoning := from(hostileAddr, false)
	loop(4, 100*time.Millisecond, func(i int) {
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		body := fmt.Sprintf(`{"email":"nobody%d@example.org","password":%q}`, i, servertest.Password)
		req, _ := http.NewRequestWithContext(rctx, "POST", base+"/v1/auth/login", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := abandoning.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	// 64 KiB of nested arrays as the value of an intent, to the hostile
	// account's own album (parsed) and to the normal account's (refused
	// unparsed).
	deep := append([]byte("\xa1\x61k"), bytes.Repeat([]byte{0x81}, 64<<10-4)...)
	deep = append(deep, 0)
	loop(2, 100*time.Millisecond, func(i int) {
		send("POST", base+"/v1/albums/"+a.album+"/upgrade", "application/cbor", deep, 10*time.Second)
		send("POST", base+"/v1/albums/"+otherAlbum+"/upgrade", "application/cbor", deep, 10*time.Second)
	})
	// Full-size relay items, 50 a second (3.2 MiB/s).
	item := []byte(fmt.Sprintf(`{"direction":"to_initiator","payload":%q}`, strings.Repeat("r", 64<<10)))
	loop(2, 40*time.Millisecond, func(i int) {
		send("POST", base+"/v1/auth/devices/enroll/channel/"+channel, "application/json", item, 10*time.Second)
	})
	// Downloads of a 4 MiB share blob that are never read.
	for range 20 {
		wg.Go(func() { holdUnread(ctx, base, bigShare) })
	}
	// Login bodies that announce 10,000 bytes and send 10.
	loop(30, time.Millisecond, func(i int) { stallBody(ctx, base) })
}

// bigShare shares a blob of size bytes and returns the path that reads it.
func (a *soakAccount) bigShare(t testing.TB, base string, size int) string {
	t.Helper()
	meta, blob := []byte("big metadata"), bytes.Repeat([]byte("big share "), size/10)
	a.upload(t, base, meta)
	a.upload(t, base, blob)
	id := strings.Repeat("b1", 16)
	servertest.Client{BaseURL: base}.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: a.access, Body: map[string]any{
		"opaque_id": id, "metadata_hash": servertest.HashOf(meta), "serves": []string{servertest.HashOf(meta), servertest.HashOf(blob)},
		"wrapped_secret": base64.StdEncoding.EncodeToString([]byte("wrapped")),
	}}).WantStatus(t, http.StatusCreated)
	return "/s/" + id + "/blob/" + servertest.HashOf(blob)
}

// relayChannel issues an enrollment code and redeems it: the channel a
// relay flood posts to.
func (a *soakAccount) relayChannel(t testing.TB, base string) string {
	t.Helper()
	r := servertest.Client{BaseURL: base}.Do(t, Req{Method: "POST", Path: "/v1/auth/devices/enroll", Token: a.access}).WantStatus(t, http.StatusOK)
	code := r.JSON(t)["code"].(string)
	r = servertest.Client{BaseURL: base}.Do(t, Req{Method: "POST", Path: "/v1/auth/devices/enroll/redeem", Body: map[string]any{"code": code}}).WantStatus(t, http.StatusOK)
	return r.JSON(t)["channel_id"].(string)
}

// hostileConn connects to the server at base from hostileAddr.
func hostileConn(ctx context.Context, base string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(hostileAddr)}}
	return d.DialContext(ctx, "tcp", strings.TrimPrefix(base, "http://"))
}

// holdUnread requests path and reads nothing of the answer until ctx ends.
func holdUnread(ctx context.Context, base, path string) {
	conn, err := hostileConn(ctx, base)
	if err != nil {
		return
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: sealbox\r\n\r\n", path)
	<-ctx.Done()
}

// stallUploads opens an upload session and starts n blob PUTs in it from
// hostileAddr, each announcing 4 MiB, sending 1 MiB and then nothing: the
// memory the server holds for uploads that stall. It returns once every
// upload has sent its 1 MiB (or was refused), and the function that closes
// them and waits for their goroutines.
func (a *soakAccount) stallUploads(t testing.TB, base string, n int) (stop func()) {
	t.Helper()
	r := servertest.Client{BaseURL: base}.Do(t, Req{Method: "POST", Path: "/v1/albums/" + a.album + "/uploads", Token: a.access}).WantStatus(t, http.StatusCreated)
	up := r.JSON(t)["upload_id"].(string)
	ctx, cancel := context.WithCancel(context.Background())
	var wg, written sync.WaitGroup
	written.Add(n)
	sent := bytes.Repeat([]byte("stalled upload "), (1<<20)/15)
	for i := range n {
		wg.Go(func() {
			conn, err := hostileConn(ctx, base)
			if err != nil {
				written.Done()
				return
			}
			defer conn.Close()
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			hash := fmt.Sprintf("%064x", i+1)
			fmt.Fprintf(conn, "PUT /v1/uploads/%s/blobs/%s HTTP/1.1\r\nHost: sealbox\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
				up, hash, a.access, 4<<20)
			conn.Write(sent)
			written.Done()
			io.Copy(io.Discard, conn)
		})
	}
	written.Wait()
	return func() {
		cancel()
		wg.Wait()
	}
}

// stallBody sends the start of a login body and then nothing, until the
// server cuts the connection or ctx ends.
func stallBody(ctx context.Context, base string) {
	conn, err := hostileConn(ctx, base)
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/auth/login HTTP/1.1\r\nHost: sealbox\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n{\"email\":")
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	io.Copy(io.Discard, conn)
}
