package kv_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// sealed is a blob of the given bytes, as a caller hands it over to be kept
// inline.
func sealed(data string) kv.Blob {
	sum := sha256.Sum256([]byte(data))
	return kv.Blob{Hash: hex.EncodeToString(sum[:]), Size: int64(len(data)), Data: []byte(data)}
}

// TestInlineBlobKeptWithItsRecord: a blob passed with its bytes is kept
// inline by the transaction that records it, counted in usage and totals
// like a file, listed as inline, and not a file gc must keep. A blob
// already recorded as a file stays one when it is brought again with its
// bytes.
func TestInlineBlobKeptWithItsRecord(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	in, file := sealed("sealed metadata"), sealed("sealed bytes of a photo")
	if !holdVia(t, s, "acct-1", "album-1", in) {
		t.Fatal("the inline blob was not newly held")
	}
	holdVia(t, s, "acct-1", "album-1", kv.Blob{Hash: file.Hash, Size: file.Size})
	holdVia(t, s, "acct-2", "album-2", file) // its bytes are a file already
	holdVia(t, s, "acct-2", "album-2", in)   // held by a second account, kept once
	for _, tc := range []struct {
		blob   kv.Blob
		inline bool
	}{{in, true}, {file, false}} {
		data, err := s.InlineBlob(tc.blob.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if got := data != nil; got != tc.inline {
			t.Fatalf("blob %q: kept inline %v, want %v", tc.blob.Data, got, tc.inline)
		}
		if tc.inline && string(data) != string(tc.blob.Data) {
			t.Fatalf("inline bytes %q, want %q", data, tc.blob.Data)
		}
	}
	page, err := s.Blobs("", 10)
	if err != nil {
		t.Fatal(err)
	}
	inline := map[string]bool{}
	for _, b := range page {
		inline[b.Hash] = b.Inline
		if b.Data != nil {
			t.Fatalf("Blobs returned the bytes of %s", b.Hash)
		}
	}
	if want := map[string]bool{in.Hash: true, file.Hash: false}; !maps.Equal(inline, want) {
		t.Fatalf("listed inline: %v, want %v", inline, want)
	}
	recorded, err := s.BlobsRecorded([]string{in.Hash, file.Hash})
	if err != nil || recorded[in.Hash] || !recorded[file.Hash] {
		t.Fatalf("files gc keeps: %v (%v); want only the file's", recorded, err)
	}
	if count, size, err := s.BlobTotals(); err != nil || count != 2 || size != in.Size+file.Size {
		t.Fatalf("totals: %d blobs, %d bytes (%v)", count, size, err)
	}
	for acct, want := range map[string]int64{"acct-1": in.Size + file.Size, "acct-2": in.Size + file.Size} {
		if got, err := s.HeldBytes(acct); err != nil || got != want {
			t.Fatalf("%s holds %d bytes (%v), want %d", acct, got, err, want)
		}
	}
	if problems, err := s.InlineProblems(true, 10); err != nil || len(problems) != 0 {
		t.Fatalf("inline problems of a sound store: %v (%v)", problems, err)
	}
}

// TestInlineBlobRefusedWritesNothing: a holding refused by the quota keeps
// no inline bytes.
func TestInlineBlobRefusedWritesNothing(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	ensureAccount(t, s, "acct-1")
	if err := s.SetQuota("acct-1@example.org", 4); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ProvisionAlbum("acct-1", "album-1", "2026-09-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenUpload("acct-1", "album-1", "sbx_up_token", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	b := sealed("more than four bytes")
	if _, err := s.AddUploadBlob("acct-1", "sbx_up_token", b, time.Hour); fault.ErrorCode(err) != fault.ECodeQuotaExceeded {
		t.Fatalf("over the quota: %v", err)
	}
	if data, err := s.InlineBlob(b.Hash); err != nil || data != nil {
		t.Fatalf("a refused blob was kept inline: %q (%v)", data, err)
	}
}

// fileBlobs is a blob engine's files in memory, for MoveInline.
type fileBlobs struct {
	files     map[string][]byte
	removeErr error
}

func (f *fileBlobs) Read(hash string, _ int64) ([]byte, error) { return f.files[hash], nil }

func (f *fileBlobs) Remove(hash string) error {
	if f.removeErr != nil {
		return f.removeErr
	}
	delete(f.files, hash)
	return nil
}

// TestMoveInline: the files at or under the threshold move inline and are
// removed only after the move commits; larger, missing and corrupt files
// stay as they are. A run cut short after its commit (here: removing a
// file fails) leaves a blob in both places, which reads, gc and the next
// run take in their stride; a run with the same threshold then does
// nothing, and a larger threshold moves more.
func TestMoveInline(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	small, big, corrupt, missing := sealed("small"), sealed(strings.Repeat("big", 10)), sealed("corrupt"), sealed("missing")
	files := &fileBlobs{files: map[string][]byte{
		small.Hash: small.Data, big.Hash: big.Data, corrupt.Hash: []byte("tampered"),
	}}
	for _, b := range []kv.Blob{small, big, corrupt, missing} {
		holdVia(t, s, "acct-1", "album-1", kv.Blob{Hash: b.Hash, Size: b.Size})
	}
	files.removeErr = errors.New("the process died")
	if moved, err := s.MoveInline(files, 10); err == nil || moved != 1 {
		t.Fatalf("a move cut short after its commit: moved %d, %v", moved, err)
	}
	if data, _ := s.InlineBlob(small.Hash); string(data) != "small" || files.files[small.Hash] == nil {
		t.Fatalf("after the cut: inline %q, file kept %v; want both", data, files.files[small.Hash] != nil)
	}
	if recorded, _ := s.BlobsRecorded([]string{small.Hash}); recorded[small.Hash] {
		t.Fatal("gc must collect the file of a blob kept inline")
	}
	files.removeErr = nil
	if moved, err := s.MoveInline(files, 10); err != nil || moved != 0 {
		t.Fatalf("the run after the cut: moved %d, %v", moved, err)
	}
	if moved, err := s.MoveInline(files, 10); err != nil || moved != 0 {
		t.Fatalf("a second complete run: moved %d, %v", moved, err)
	}
	page, err := s.Blobs("", 10)
	if err != nil {
		t.Fatal(err)
	}
	var inline []string
	for _, b := range page {
		if b.Inline {
			inline = append(inline, b.Hash)
		}
	}
	if !slices.Equal(inline, []string{small.Hash}) {
		t.Fatalf("inline after the move: %v, want only %s", inline, small.Hash)
	}
	if moved, err := s.MoveInline(files, 64); err != nil || moved != 1 || files.files[big.Hash] != nil {
		t.Fatalf("a larger threshold: moved %d (%v), big file kept %v", moved, err, files.files[big.Hash] != nil)
	}
	if files.files[corrupt.Hash] == nil {
		t.Fatal("a corrupt file was moved or removed")
	}
	if problems, err := s.InlineProblems(true, 10); err != nil || len(problems) != 0 {
		t.Fatalf("inline problems after the move: %v (%v)", problems, err)
	}
}
