package server_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"testing"

	"sealbox/server"
	"sealbox/server/servertest"
)

// BenchmarkSmallBlobPut: blob PUTs of 4, 16 and 64 KiB by 16 concurrent
// writers, kept inline (--inline-max 64KiB) and as files (--inline-max 0):
// what choosing the threshold trades. Compare ops/s within one run.
func BenchmarkSmallBlobPut(b *testing.B) {
	for _, size := range []int{4 << 10, 16 << 10, 64 << 10} {
		for _, mode := range []struct {
			name      string
			inlineMax int64
		}{{"inline", 64 << 10}, {"file", 0}} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, mode.name), func(b *testing.B) {
				ts := MustOpenServer(b, func(c *server.Config) { c.InlineMax = mode.inlineMax })
				benchSmallPut(b, ts, size, 16)
			})
		}
	}
}

func benchSmallPut(b *testing.B, ts *TestServer, size, writers int) {
	tok := ts.Register(b, "bench@example.org")
	up := ts.OpenUpload(b, tok.Access, ts.NewAlbum(b, tok.Access))
	base := randomBytes(size)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = bytes.Clone(base)
		binary.BigEndian.PutUint64(bodies[i], uint64(i))
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	sendInParallel(b, writers, http.StatusCreated, func(i int) *http.Request {
		req, _ := http.NewRequest("PUT", ts.URL()+"/v1/uploads/"+up+"/blobs/"+servertest.HashOf(bodies[i]), bytes.NewReader(bodies[i]))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Authorization", "Bearer "+tok.Access)
		return req
	})
}
