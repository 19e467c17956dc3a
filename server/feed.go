package server

import (
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/fault"
)

func (s *Server) registerFeedRoutes() {
	s.handle(http.MethodGet, "/v1/albums/:album_id/feed", s.bearer(s.handleFeed))
}

// Page sizes of the feed (server/PROTOCOL.md §9).
const (
	feedDefaultLimit = 500
	feedMaxLimit     = 5000
)

type feedEntryView struct {
	SyncSeq          uint64 `json:"sync_seq"`
	AssetID          string `json:"asset_id"`
	Action           string `json:"action"`
	ManifestHash     string `json:"manifest_hash"`
	CiphertextHash   string `json:"ciphertext_hash"`
	MetadataBlobHash string `json:"metadata_blob_hash,omitempty"`
	OriginalBlobHash string `json:"original_blob_hash,omitempty"`
	AppliedAt        string `json:"applied_at"`
}

type feedResponse struct {
	Entries []feedEntryView `json:"entries"`
	// NextAfter is the after of the next page: the last entry's sync_seq, or
	// the request's after when the page is empty.
	NextAfter uint64 `json:"next_after"`
	HasMore   bool   `json:"has_more"`
}

// feedQuery parses after (default 0) and limit (pageLimit): anything else
// is a malformed query parameter (400).
func feedQuery(r *http.Request) (after uint64, limit int, err error) {
	if v := r.URL.Query().Get("after"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, fault.FieldErrorf(fault.ECodeMalformed, "after", "after must be a non-negative integer")
		}
	}
	limit, err = pageLimit(r)
	return after, limit, err
}

// pageLimit parses the limit of a feed or asset page (default 500, 1 to
// 5000): a limit out of range is 400, so a client never silently receives
// a smaller page than it asked for.
func pageLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return feedDefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > feedMaxLimit {
		return 0, fault.FieldErrorf(fault.ECodeMalformed, "limit", "limit must be an integer from 1 to %d", feedMaxLimit)
	}
	return n, nil
}

// newFeedEntryView is an applied op as the feed and the asset list answer it.
func newFeedEntryView(e kv.FeedEntry) feedEntryView {
	return feedEntryView{
		SyncSeq: e.SyncSeq, AssetID: e.AssetID, Action: e.Action, ManifestHash: e.ManifestHash,
		CiphertextHash: e.CiphertextHash, MetadataBlobHash: e.MetadataBlobHash, OriginalBlobHash: e.OriginalBlobHash,
		AppliedAt: formatTime(e.AppliedAt),
	}
}

// handles "GET /v1/albums/:album_id/feed": the album's applied ops with
// sync_seq above after, oldest first. An album that does not exist or is
// another account's answers 403 error.album.forbidden, as ops on it do: the
// feed is the read side of the ops surface and answers like it.
func (s *Server) handleFeed(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	after, limit, err := feedQuery(r)
	if err != nil {
		return err
	}
	entries, hasMore, err := s.store.Feed(sess.AccountID, albumID, after, limit)
	if err != nil {
		return err
	}
	resp := feedResponse{Entries: make([]feedEntryView, 0, len(entries)), NextAfter: after, HasMore: hasMore}
	for _, e := range entries {
		resp.Entries = append(resp.Entries, newFeedEntryView(e))
		resp.NextAfter = e.SyncSeq
	}
	return writeJSON(w, http.StatusOK, resp)
}
