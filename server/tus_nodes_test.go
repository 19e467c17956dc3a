package server_test

import (
	"context"
	"io"
	"net/http"
	"path"
	"testing"
	"time"

	"sealbox/server"
)

// streamPatch starts a PATCH of the transfer at loc on ts from offset 0
// whose body the test writes through the returned pipe, and waits until the
// request holds the transfer's lease. done is
// closed when the request has ended.
func streamPatch(t *testing.T, ts *TestServer, access, loc string, first []byte) (*io.PipeWriter, chan struct{}) {
	t.Helper()
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(context.Background(), "PATCH", ts.URL()+loc, pr)
	req.Header.Set("Authorization", "Bearer "+access)
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", "0")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if _, err := pw.Write(first); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The request holds the transfer's lease from before it reads
		// the body until it ends: on any blob engine that is what shows
		// it streaming.
		if holder, _, err := ts.Store.LeaseHolder("tus/" + path.Base(loc)); err != nil {
			t.Fatal(err)
		} else if holder != "" {
			return pw, done
		}
		if time.Now().After(deadline) {
			t.Fatal("the streaming PATCH never wrote")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTusOneWriterAcrossNodes: while a PATCH streams through one node, a
// PATCH or DELETE of the same transfer through another node is told to
// retry (423); once it ends, the client resumes through the other node.
func TestTusOneWriterAcrossNodes(t *testing.T) {
	ts, tok, loc, data := openTransfer(t, randomData(4<<20))
	other := ts.SecondNode(t)
	pw, done := streamPatch(t, ts, tok.Access, loc, data[:1<<20])
	other.TusPatch(t, tok.Access, loc, 0, nil).WantProblem(t, http.StatusLocked, "error.transfer.locked")
	other.Do(t, Req{Method: "DELETE", Path: loc, Token: tok.Access, Header: tusHeaders()}).
		WantProblem(t, http.StatusLocked, "error.transfer.locked")
	if _, err := pw.Write(data[1<<20 : 2<<20]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	<-done
	offset := other.TusHead(t, tok.Access, loc)
	if offset != 2<<20 {
		t.Fatalf("acknowledged %d bytes, want %d", offset, 2<<20)
	}
	other.TusPatch(t, tok.Access, loc, offset, data[offset:]).WantStatus(t, http.StatusNoContent)
	ts.wantStored(t, data)
}

// TestTusLeaseOfAKilledNode: a node killed mid-PATCH leaves its lease on the
// transfer in the store. Every other node refuses the transfer (423) until
// the lease's ttl has passed (the clock moves; nothing sleeps), and the
// client's retry then succeeds.
func TestTusLeaseOfAKilledNode(t *testing.T) {
	ts, tok, loc, data := openTransfer(t, randomData(1<<20))
	ttl := ts.Config.TusLeaseTTL
	if held, err := ts.Store.TryLease("tus/"+path.Base(loc), "killed-node/1", ttl); err != nil || !held {
		t.Fatalf("the killed node's lease: %v %v", held, err)
	}
	ts.TusPatch(t, tok.Access, loc, 0, data).WantProblem(t, http.StatusLocked, "error.transfer.locked")
	ts.Clock.Advance(ttl - time.Second)
	ts.TusPatch(t, tok.Access, loc, 0, data).WantProblem(t, http.StatusLocked, "error.transfer.locked")
	ts.Clock.Advance(time.Second)
	ts.TusPatch(t, tok.Access, loc, 0, data).WantStatus(t, http.StatusNoContent)
	ts.wantStored(t, data)
	if holder, _, err := ts.Store.LeaseHolder("tus/" + path.Base(loc)); err != nil || holder != "" {
		t.Fatalf("after the PATCH the transfer's lease is held by %q (%v)", holder, err)
	}
}

// TestTusLostLeaseAcknowledgesNothingMore: a PATCH whose node could not
// renew its lease in time (here another holder took it once it had lapsed)
// stops reading, answers 423 and acknowledges none of its bytes: another
// writer may own the transfer now.
func TestTusLostLeaseAcknowledgesNothingMore(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.TusLeaseTTL = 300 * time.Millisecond })
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	data := randomData(4 << 20)
	loc := ts.TusCreate(t, tok.Access, up, data)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PATCH", ts.URL()+loc, pr)
	req.Header.Set("Authorization", "Bearer "+tok.Access)
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", "0")
	status := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	if _, err := pw.Write(data[:1<<20]); err != nil {
		t.Fatal(err)
	}
	// The clock jumps past the lease; another holder takes it before the
	// writer's next renewal (every 100 ms) does.
	name := "tus/" + path.Base(loc)
	for {
		ts.Clock.Advance(time.Second)
		if held, err := ts.Store.TryLease(name, "thief/1", time.Minute); err != nil {
			t.Fatal(err)
		} else if held {
			break
		}
	}
	go func() {
		for i := 1; i < 4; i++ {
			if _, err := pw.Write(data[i<<20 : (i+1)<<20]); err != nil {
				return
			}
		}
		pw.Close()
	}()
	if got := <-status; got != http.StatusLocked {
		t.Fatalf("the PATCH that lost its lease: %d, want 423", got)
	}
	pr.Close()
	if err := ts.Store.ReleaseLease(name, "thief/1"); err != nil {
		t.Fatal(err)
	}
	if offset := ts.TusHead(t, tok.Access, loc); offset != 0 {
		t.Fatalf("acknowledged %d bytes after the lease was lost", offset)
	}
}
