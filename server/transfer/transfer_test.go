package transfer_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
	"sealbox/server/content"
	"sealbox/server/transfer"
)

const (
	leaseTTL = 30 * time.Second
	account  = "acct-1"
	upload   = "sbx_up_transfer"
)

// rig is a real bbolt store and blob directory in a temp dir, an account
// with an open upload session, and the Transfers over them.
type rig struct {
	store *kv.Store
	blobs *blobs.Dir
	clock *kvtest.Clock
	ts    *transfer.Transfers
}

func mustOpenRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	c := kvtest.NewClock()
	s, err := kvtest.Open(filepath.Join(dir, "sealbox.db"), kv.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b, err := blobs.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	a := &kv.Account{ID: account, Email: "a@example.org", PasswordHash: "h", CreatedAt: c.Now()}
	sess := &kv.Session{ID: "sess-1", AccountID: account, CreatedAt: c.Now(), AuthenticatedAt: c.Now(),
		AccessExpiresAt: c.Now().Add(time.Hour), RefreshExpiresAt: c.Now().Add(time.Hour)}
	if err := s.CreateAccount(a, sess, "at-1", "rt-1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ProvisionAlbum(account, "album", "2026-09-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenUpload(account, "album", upload, time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	return &rig{store: s, blobs: b, clock: c, ts: transfer.New(s, b, content.New(s, b, 0), zerolog.Nop(), leaseTTL, time.Hour)}
}

// create records a transfer of data under hash (data's own address unless
// given) and returns its id.
func (r *rig) create(t *testing.T, id string, data []byte, hash string) *kv.Transfer {
	t.Helper()
	if hash == "" {
		hash = blobs.AddressOf(data)
	}
	tr := &kv.Transfer{ID: id, Hash: hash, Length: int64(len(data))}
	if err := r.store.CreateTransfer(account, upload, tr, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
	return tr
}

// appendAs claims the transfer, appends body from its recorded offset and
// releases the claim.
func (r *rig) appendAs(t *testing.T, id, holder string, body io.Reader) (int64, error) {
	t.Helper()
	c, err := r.ts.Claim(id, holder)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	tr, err := r.ts.Resumable(account, upload, id)
	if err != nil {
		return 0, err
	}
	return c.Append(body, account, upload, tr)
}

func randomData(n int) []byte {
	b := make([]byte, n)
	rng := rand.NewChaCha8([32]byte{byte(n)})
	rng.Read(b)
	return b
}

func wantProblem(t *testing.T, err error, code string) *fault.Error {
	t.Helper()
	var f *fault.Error
	if !errors.As(err, &f) || f.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	return f
}

// wantNoPartials fails unless the blob directory holds no partial file but
// those of keep.
func (r *rig) wantNoPartials(t *testing.T, keep ...string) {
	t.Helper()
	left, err := r.blobs.StalePartials(time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range left {
		if !slices.Contains(keep, p.ID) {
			t.Fatalf("the partial file of %s is left", p.ID)
		}
	}
}

func (r *rig) offset(t *testing.T, id string) int64 {
	t.Helper()
	tr, err := r.store.Transfer(account, upload, id)
	if err != nil {
		t.Fatal(err)
	}
	return tr.Offset
}

// brokenBody yields data, then fails as a body cut off mid-request does.
type brokenBody struct{ r io.Reader }

func (b brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, fault.Errorf(fault.ECodeMalformed, "the body broke off")
	}
	return n, err
}

// TestAppendResumesAndCompletes: a body that breaks off has the bytes that
// arrived acknowledged; the next writer resumes from there (the hash state
// restored), and the last byte makes the blob, held by the account, with
// the partial file removed.
func TestAppendResumesAndCompletes(t *testing.T) {
	r := mustOpenRig(t)
	data := randomData(3 << 20)
	r.create(t, "t-1", data, "")
	got, err := r.appendAs(t, "t-1", "node/1", brokenBody{bytes.NewReader(data[:1<<20])})
	wantProblem(t, err, fault.ECodeMalformed)
	if got != 1<<20 || r.offset(t, "t-1") != 1<<20 {
		t.Fatalf("a broken body acknowledged %d (recorded %d), want %d", got, r.offset(t, "t-1"), 1<<20)
	}
	if got, err := r.appendAs(t, "t-1", "node/2", bytes.NewReader(data[1<<20:])); err != nil || got != int64(len(data)) {
		t.Fatalf("the resumed append: %d, %v", got, err)
	}
	if held, err := r.store.Holds(account, blobs.AddressOf(data)); err != nil || !held {
		t.Fatalf("the completed blob is not held: %v", err)
	}
	rc, _, err := r.blobs.Open(blobs.AddressOf(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if stored, _ := io.ReadAll(rc); !bytes.Equal(stored, data) {
		t.Fatal("the stored blob is not the appended bytes")
	}
	r.wantNoPartials(t)
	if ids, err := r.store.TransferRemovals(10); err != nil || len(ids) != 0 {
		t.Fatalf("removals left queued: %q (%v)", ids, err)
	}
}

// TestAppendRefusals: a body past the declared length is refused whole, and
// bytes that do not hash to the declared address discard the transfer.
func TestAppendRefusals(t *testing.T) {
	r := mustOpenRig(t)
	data := randomData(1000)
	r.create(t, "t-long", data, "")
	_, err := r.appendAs(t, "t-long", "node/1", bytes.NewReader(append(data, 'x')))
	wantProblem(t, err, fault.ECodeTooLarge)
	if r.offset(t, "t-long") != 0 {
		t.Fatal("a body past the length was acknowledged")
	}
	r.create(t, "t-wrong", data, blobs.AddressOf([]byte("other bytes")))
	_, err = r.appendAs(t, "t-wrong", "node/1", bytes.NewReader(data))
	wantProblem(t, err, fault.ECodeHashMismatch)
	_, err = r.store.Transfer(account, upload, "t-wrong")
	wantProblem(t, err, fault.ECodeTransferNotFound)
	r.wantNoPartials(t, "t-long")
}

// TestClaimIsOneWriter: a transfer claimed by one writer is refused to
// another with the time left on the lease, and free again once released.
func TestClaimIsOneWriter(t *testing.T) {
	r := mustOpenRig(t)
	r.create(t, "t-1", randomData(100), "")
	first, err := r.ts.Claim("t-1", "node-a/1")
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(10 * time.Second)
	_, err = r.ts.Claim("t-1", "node-b/1")
	if f := wantProblem(t, err, fault.ECodeTransferLocked); f.RetryAfter != 20*time.Second {
		t.Fatalf("Retry-After %v, want the 20 s left on the lease", f.RetryAfter)
	}
	first.Release()
	second, err := r.ts.Claim("t-1", "node-b/1")
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	second.Release()
}

// TestAppendAfterTheLeaseWasTaken: a writer whose lease lapsed (it stalled
// past the ttl) and that another node took acknowledges none of the bytes
// it then reads: error.transfer.locked, the offset as it was.
func TestAppendAfterTheLeaseWasTaken(t *testing.T) {
	r := mustOpenRig(t)
	data := randomData(2 << 20)
	r.create(t, "t-1", data, "")
	c, err := r.ts.Claim("t-1", "node-a/1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	tr, err := r.ts.Resumable(account, upload, "t-1")
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(leaseTTL)
	if ok, err := r.store.TryLease("tus/t-1", "node-b/1", time.Minute); err != nil || !ok {
		t.Fatalf("node b's lease: %v %v", ok, err)
	}
	_, err = c.Append(bytes.NewReader(data[:1<<20]), account, upload, tr)
	if f := wantProblem(t, err, fault.ECodeTransferLocked); f.RetryAfter != time.Minute {
		t.Fatalf("Retry-After %v, want node b's minute", f.RetryAfter)
	}
	if got := r.offset(t, "t-1"); got != 0 {
		t.Fatalf("a writer that lost its lease acknowledged %d bytes", got)
	}
}

// TestResumableDiscardsALostPartial: a transfer whose partial file holds
// fewer bytes than it acknowledged (a restored backup, a lost disk) is
// discarded and answered as not found.
func TestResumableDiscardsALostPartial(t *testing.T) {
	r := mustOpenRig(t)
	data := randomData(3 << 20)
	r.create(t, "t-1", data, "")
	if _, err := r.appendAs(t, "t-1", "node/1", brokenBody{bytes.NewReader(data[:1<<20])}); fault.ErrorCode(err) != fault.ECodeMalformed {
		t.Fatal(err)
	}
	if err := r.blobs.RemovePartial("t-1"); err != nil {
		t.Fatal(err)
	}
	_, err := r.ts.Resumable(account, upload, "t-1")
	wantProblem(t, err, fault.ECodeTransferNotFound)
	_, err = r.store.Transfer(account, upload, "t-1")
	wantProblem(t, err, fault.ECodeTransferNotFound)
}

// TestCreateEmpty: an empty transfer is the empty blob, stored at creation
// (a tus client sends no bytes for it); another declared hash stores
// nothing.
func TestCreateEmpty(t *testing.T) {
	r := mustOpenRig(t)
	err := r.ts.Create(account, upload, &kv.Transfer{ID: "t-other", Hash: blobs.AddressOf([]byte("x"))}, kv.TransferLimits{})
	wantProblem(t, err, fault.ECodeHashMismatch)
	if held, _ := r.store.Holds(account, blobs.AddressOf(nil)); held {
		t.Fatal("a refused empty upload stored the empty blob")
	}
	if err := r.ts.Create(account, upload, &kv.Transfer{ID: "t-empty", Hash: blobs.AddressOf(nil)}, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
	if held, err := r.store.Holds(account, blobs.AddressOf(nil)); err != nil || !held {
		t.Fatalf("the empty blob is not held: %v", err)
	}
	_, err = r.store.Transfer(account, upload, "t-empty")
	wantProblem(t, err, fault.ECodeTransferNotFound)
}
