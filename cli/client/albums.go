package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"sealbox/cli/sealed"
)

// Album is an album the account provisioned (server/PROTOCOL.md §9).
type Album struct {
	AlbumID         string `json:"album_id"`
	ProtocolVersion string `json:"protocol_version"`
	CreatedAt       string `json:"created_at"`
	// SyncSeq is the feed position of the album's last applied op.
	SyncSeq uint64 `json:"sync_seq"`
	// DeletedAt is set while the album is in the trash: it takes no op.
	DeletedAt string `json:"deleted_at,omitempty"`
}

type provisionAnswer struct {
	AlbumID         string `json:"album_id"`
	ProtocolVersion string `json:"protocol_version"`
	Created         bool   `json:"created"`
}

// ProvisionAlbum binds albumID (a lowercase UUID the client chose) to the
// account and returns the protocol date it is pinned to. It is idempotent,
// so a try whose answer was lost is sent again.
func (c *Client) ProvisionAlbum(ctx context.Context, albumID string) (protocolVersion string, err error) {
	body, err := jsonBody(map[string]string{"album_id": albumID})
	if err != nil {
		return "", err
	}
	var a provisionAnswer
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/albums", contentType: "application/json", body: body, bearer: true, retryable: true}, &a)
	return a.ProtocolVersion, err
}

// Albums lists the account's albums, oldest first.
func (c *Client) Albums(ctx context.Context) ([]Album, error) {
	var a struct {
		Albums []Album `json:"albums"`
	}
	_, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/v1/albums", bearer: true, retryable: true}, &a)
	return a.Albums, err
}

// Op is one signed lifecycle op: the envelope (the signed manifest's
// server-visible projection, cli/sealed/FORMAT.md §7.3), the manifest's CBOR
// and the sealed metadata blob (both sent as standard base64).
type Op struct {
	ManifestEnvelope sealed.Envelope `json:"manifest_envelope"`
	ManifestCBOR     []byte          `json:"manifest_cbor"`
	MetadataBlob     []byte          `json:"metadata_blob"`
}

// OpResult is the server's answer to an applied op. Replayed reports an op
// the album had already applied (its answer, sent again).
type OpResult struct {
	AssetID  string `json:"asset_id"`
	SyncSeq  uint64 `json:"sync_seq"`
	Action   string `json:"action"`
	Replayed bool   `json:"replayed"`
}

// ApplyOp applies op to albumID. An op is keyed by its manifest's hash, so
// sending it again after a lost answer is answered as a replay, not applied
// twice: it is retried.
func (c *Client) ApplyOp(ctx context.Context, albumID string, op Op) (OpResult, error) {
	body, err := jsonBody(op)
	if err != nil {
		return OpResult{}, err
	}
	var r OpResult
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/albums/" + url.PathEscape(albumID) + "/ops",
		contentType: "application/json", body: body, bearer: true, retryable: true}, &r)
	return r, err
}

// FeedEntry is an applied op as the feed and the asset list show it.
// Optional hashes are "" when absent.
type FeedEntry struct {
	SyncSeq          uint64 `json:"sync_seq"`
	AssetID          string `json:"asset_id"`
	Action           string `json:"action"`
	ManifestHash     string `json:"manifest_hash"`
	CiphertextHash   string `json:"ciphertext_hash"`
	MetadataBlobHash string `json:"metadata_blob_hash"`
	OriginalBlobHash string `json:"original_blob_hash"`
	AppliedAt        string `json:"applied_at"`
}

// FeedPage is one page of an album's feed.
type FeedPage struct {
	Entries   []FeedEntry `json:"entries"`
	NextAfter uint64      `json:"next_after"`
	HasMore   bool        `json:"has_more"`
}

// Feed reads the album's ops with sync_seq above after, oldest first, at
// most limit (0: the server's default).
func (c *Client) Feed(ctx context.Context, albumID string, after uint64, limit int) (FeedPage, error) {
	q := url.Values{"after": {strconv.FormatUint(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p FeedPage
	_, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/v1/albums/" + url.PathEscape(albumID) + "/feed", query: q, bearer: true, retryable: true}, &p)
	return p, err
}

// AssetPage is one page of an album's assets, each at its last op.
type AssetPage struct {
	Assets    []FeedEntry `json:"assets"`
	NextAfter string      `json:"next_after"`
	HasMore   bool        `json:"has_more"`
	// FeedAfter is the album's sync_seq when the page was read: follow the
	// feed from the first page's.
	FeedAfter uint64 `json:"feed_after"`
}

// Assets reads the album's assets with ids above after ("" for the first
// page), at most limit (0: the server's default).
func (c *Client) Assets(ctx context.Context, albumID, after string, limit int) (AssetPage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p AssetPage
	_, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/v1/albums/" + url.PathEscape(albumID) + "/assets", query: q, bearer: true, retryable: true}, &p)
	return p, err
}

// AllAssets reads every page of the album's assets and returns them with the
// feed position to follow the album from.
func (c *Client) AllAssets(ctx context.Context, albumID string) (assets []FeedEntry, feedAfter uint64, err error) {
	after := ""
	for first := true; ; first = false {
		p, err := c.Assets(ctx, albumID, after, 0)
		if err != nil {
			return nil, 0, err
		}
		if first {
			feedAfter = p.FeedAfter
		}
		assets = append(assets, p.Assets...)
		if !p.HasMore {
			return assets, feedAfter, nil
		}
		after = p.NextAfter
	}
}
