package server_test

import (
	"net/http"
	"testing"

	"sealbox/kv/fault"
)

// TestAssetsList: an album's assets, a page at a time in asset_id order,
// each as the feed entry of its last applied op, with the album's sync_seq
// to follow the feed from. Another account's album is 403 as for the feed;
// a malformed after or limit is 400.
func TestAssetsList(t *testing.T) {
	f := newOpFixture(t)
	const (
		assetB = "a55e7000-0000-4000-8000-000000000002"
		assetC = "a55e7000-0000-4000-8000-000000000003"
	)
	headA := f.createAsset(t, assetA)
	f.createAsset(t, assetC)
	f.createAsset(t, assetB)
	replace := f.replaceBody(assetA, headA)
	f.op(t, replace).WantStatus(t, http.StatusOK)

	list := func(query string) map[string]any {
		t.Helper()
		return f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/assets" + query, Token: f.tok.Access}).
			WantStatus(t, http.StatusOK).JSON(t)
	}
	page := list("?limit=2")
	assets := page["assets"].([]any)
	if len(assets) != 2 || page["has_more"] != true || page["next_after"] != assetB || page["feed_after"] != float64(4) {
		t.Fatalf("first page: %v", page)
	}
	a := assets[0].(map[string]any)
	if a["asset_id"] != assetA || a["action"] != "replace" || a["manifest_hash"] != manifestHash(replace) ||
		a["sync_seq"] != float64(4) || a["original_blob_hash"] != f.original {
		t.Fatalf("asset A is not its last op: %v", a)
	}
	if b := assets[1].(map[string]any); b["asset_id"] != assetB || b["action"] != "create" || b["sync_seq"] != float64(3) {
		t.Fatalf("asset B: %v", b)
	}
	page = list("?limit=2&after=" + assetB)
	assets = page["assets"].([]any)
	if len(assets) != 1 || page["has_more"] != false || page["next_after"] != assetC || assets[0].(map[string]any)["sync_seq"] != float64(2) {
		t.Fatalf("second page: %v", page)
	}
	page = list("?after=" + assetC)
	if len(page["assets"].([]any)) != 0 || page["has_more"] != false || page["next_after"] != assetC {
		t.Fatalf("past the last asset: %v", page)
	}

	other := f.ts.Register(t, "other@example.org")
	f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/assets", Token: other.Access}).
		WantProblem(t, http.StatusForbidden, fault.ECodeAlbumForbidden)
	for _, q := range []string{"?after=not-a-uuid", "?after=A55E7000-0000-4000-8000-000000000001", "?limit=0", "?limit=5001"} {
		f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/assets" + q, Token: f.tok.Access}).
			WantProblem(t, http.StatusBadRequest, fault.ECodeMalformed)
	}
}
