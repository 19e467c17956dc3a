package server_test

import (
	"bytes"
	"net/http"
	"sealbox/server/servertest"
	"strings"
	"testing"
)

// TestTusCompletionCannotRewriteBlob replays the review's exploit (issue
// 23 §1) and its variants: a completion the store refuses (quota) must
// leave no way to write into the named blob, a PUT that finds a file at its
// address must not adopt a damaged one, and another account's share of the
// genuine bytes must serve exactly them. On the code before the fix the
// reviewer's sequence ended with the share serving "JUNK".
func TestTusCompletionCannotRewriteBlob(t *testing.T) {
	cases := []struct {
		name string
		// refuse makes the final PATCH's completion refused (quota), or
		// reports false when the fix leaves nothing to refuse.
		refuse func(t *testing.T, ts *TestServer, access, up string) bool
		// from is where the final PATCH starts: 0 sends the whole blob in
		// it, else the bytes before it were acknowledged by a first PATCH.
		from int
	}{
		{name: "a PUT takes the transfer's reserved room (the review's exploit)", refuse: func(t *testing.T, ts *TestServer, access, up string) bool {
			// The 1500 bytes the transfer reserved are not free: with them
			// 1000 more pass the quota of 2000.
			ts.PutBlob(t, access, up, bytes.Repeat([]byte{7}, 1000)).WantProblem(t, http.StatusForbidden, "error.quota.exceeded")
			return false
		}},
		{name: "the quota is lowered mid-transfer, whole blob in one PATCH", refuse: lowerQuota},
		{name: "the quota is lowered mid-transfer, last PATCH from 1000", refuse: lowerQuota, from: 1000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts := MustOpenServer(t)
			mallory := ts.Register(t, "mallory@example.org")
			if err := ts.Store.SetQuota("mallory@example.org", 2000); err != nil {
				t.Fatal(err)
			}
			genuine := patterned(1500)
			up := ts.OpenUpload(t, mallory.Access, ts.NewAlbum(t, mallory.Access))
			loc := ts.TusCreate(t, mallory.Access, up, genuine)
			if c.from > 0 {
				ts.TusPatch(t, mallory.Access, loc, 0, genuine[:c.from]).WantStatus(t, http.StatusNoContent)
			}
			refused := c.refuse(t, ts, mallory.Access, up)
			final := ts.TusPatch(t, mallory.Access, loc, c.from, genuine[c.from:])
			junk := ts.TusPatch(t, mallory.Access, loc, c.from, []byte("JUNK"))
			switch {
			case !refused:
				final.WantStatus(t, http.StatusNoContent)
				junk.WantProblem(t, http.StatusNotFound, "error.transfer.not_found")
			case c.from == 0:
				final.WantProblem(t, http.StatusForbidden, "error.quota.exceeded")
				// The transfer starts again from 0 in a partial of its own.
				wantHeaders(t, junk.WantStatus(t, http.StatusNoContent), map[string]string{"Upload-Offset": "4"})
			default:
				final.WantProblem(t, http.StatusForbidden, "error.quota.exceeded")
				// Its bytes are the blob's now: what is written is only
				// hashed, and the transfer ends on the hash check.
				wantHeaders(t, junk.WantStatus(t, http.StatusNoContent), map[string]string{"Upload-Offset": "1004"})
				ts.TusPatch(t, mallory.Access, loc, 1004, genuine[1004:]).
					WantProblem(t, http.StatusUnprocessableEntity, "error.blob.hash_mismatch")
			}

			alice := ts.Register(t, "alice@example.org")
			aliceUp := ts.OpenUpload(t, alice.Access, ts.NewAlbum(t, alice.Access))
			put := ts.PutBlob(t, alice.Access, aliceUp, genuine).WantStatus(t, http.StatusCreated).JSON(t)
			if put["size"] != float64(len(genuine)) {
				t.Fatalf("alice's PUT recorded size %v, want %d", put["size"], len(genuine))
			}
			meta := []byte("alice's sealed metadata")
			ts.PutBlob(t, alice.Access, aliceUp, meta).WantStatus(t, http.StatusCreated)
			id := strings.Repeat("a1", 16)
			ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: alice.Access, Body: map[string]any{
				"opaque_id": id, "metadata_hash": servertest.HashOf(meta), "serves": []string{servertest.HashOf(meta), servertest.HashOf(genuine)},
			}}).WantStatus(t, http.StatusCreated)
			r := ts.Do(t, Req{Method: "GET", Path: "/s/" + id + "/blob/" + servertest.HashOf(genuine)}).WantStatus(t, http.StatusOK)
			if !bytes.Equal(r.Body, genuine) {
				t.Fatalf("the share serves %d bytes (%.8q...), not the genuine %d", len(r.Body), r.Body, len(genuine))
			}
			ts.wantStored(t, genuine)
		})
	}
}

// lowerQuota sets mallory's quota below what its transfer reserved, as an
// operator may at any time: the completion is then refused.
func lowerQuota(t *testing.T, ts *TestServer, _, _ string) bool {
	if err := ts.Store.SetQuota("mallory@example.org", 1000); err != nil {
		t.Fatal(err)
	}
	return true
}
