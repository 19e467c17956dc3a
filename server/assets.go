package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv/fault"
)

func (s *Server) registerAssetRoutes() {
	s.handle(http.MethodGet, "/v1/albums/:album_id/assets", s.bearer(s.handleAssets))
}

type assetsResponse struct {
	// Assets are the album's assets in asset_id order, each as the feed
	// entry of its last applied op.
	Assets []feedEntryView `json:"assets"`
	// NextAfter is the after of the next page: the last asset's id, or the
	// request's after when the page is empty.
	NextAfter string `json:"next_after"`
	HasMore   bool   `json:"has_more"`
	// FeedAfter is the album's sync_seq when the page was read: a device
	// that starts on the album follows the feed from the first page's
	// FeedAfter and misses nothing applied while it read the pages.
	FeedAfter uint64 `json:"feed_after"`
}

// assetsQuery parses after (an asset id, default none) and limit (default
// 500, 1 to 5000) with the feed's rules: anything else is 400.
func assetsQuery(r *http.Request) (after string, limit int, err error) {
	after = r.URL.Query().Get("after")
	if after != "" && !isCanonicalUUID(after) {
		return "", 0, fault.FieldErrorf(fault.ECodeMalformed, "after", "after must be an asset id (a lowercase UUID)")
	}
	limit, err = pageLimit(r)
	return after, limit, err
}

// handles "GET /v1/albums/:album_id/assets": the album's current assets, a
// page at a time, so a second device starts without replaying the feed from
// zero (server/PROTOCOL.md §9). An album that does not exist or is another
// account's answers 403 error.album.forbidden, as the feed does.
func (s *Server) handleAssets(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	after, limit, err := assetsQuery(r)
	if err != nil {
		return err
	}
	assets, hasMore, syncSeq, err := s.store.Assets(sess.AccountID, albumID, after, limit)
	if err != nil {
		return err
	}
	resp := assetsResponse{Assets: make([]feedEntryView, 0, len(assets)), NextAfter: after, HasMore: hasMore, FeedAfter: syncSeq}
	for _, e := range assets {
		resp.Assets = append(resp.Assets, newFeedEntryView(e))
		resp.NextAfter = e.AssetID
	}
	return writeJSON(w, http.StatusOK, resp)
}
