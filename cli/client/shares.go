package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Share is a link registration (server/PROTOCOL.md §7): the client draws
// OpaqueID (32 lowercase hex characters) and seals what the link serves;
// the secret that opens it travels only in the link's fragment.
type Share struct {
	OpaqueID     string   `json:"opaque_id"`
	MetadataHash string   `json:"metadata_hash"`
	Serves       []string `json:"serves"`
	// WrappedSecret, for a link with a passphrase, is the fragment's
	// secret wrapped under the passphrase (sent as standard base64).
	WrappedSecret []byte     `json:"wrapped_secret,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
}

// CreateShare registers the link. It is sent again after a lost answer:
// the same registration of an id the account already holds is refused
// with error.share.id_taken, which the caller, having drawn the id,
// recognises as its own.
func (c *Client) CreateShare(ctx context.Context, sh Share) error {
	body, err := jsonBody(sh)
	if err != nil {
		return err
	}
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/shares", contentType: "application/json", body: body, bearer: true}, nil)
	return err
}

// RevokeShare ends the link at once, on every node.
func (c *Client) RevokeShare(ctx context.Context, opaqueID string) error {
	_, err := c.doJSON(ctx, request{method: http.MethodDelete, path: "/v1/shares/" + url.PathEscape(opaqueID), bearer: true, retryable: true}, nil)
	return err
}

// ShareInfo is what a link's holder reads first.
type ShareInfo struct {
	MetadataHash        string `json:"metadata_hash"`
	PassphraseProtected bool   `json:"passphrase_protected"`
}

// ShareInfo reads a link without a token, as its holder does.
func (c *Client) ShareInfo(ctx context.Context, opaqueID string) (ShareInfo, error) {
	var i ShareInfo
	_, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/s/" + url.PathEscape(opaqueID), retryable: true}, &i)
	return i, err
}

// ReadSharedBlob opens a blob the link serves, from offset for length bytes
// (length < 0: to the end), without a token.
func (c *Client) ReadSharedBlob(ctx context.Context, opaqueID, hash string, offset, length int64) (io.ReadCloser, error) {
	return c.readRange(ctx, request{method: http.MethodGet, path: "/s/" + url.PathEscape(opaqueID) + "/blob/" + hash, retryable: true}, offset, length)
}

// maxWrappedSecret is a wrapped secret's bound (server/PROTOCOL.md §7).
const maxWrappedSecret = 16 << 10

// WrappedSecret reads a passphrase link's wrapped secret, without a token.
func (c *Client) WrappedSecret(ctx context.Context, opaqueID string) ([]byte, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/s/" + url.PathEscape(opaqueID) + "/wrapped-secret", retryable: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readAll(resp, maxWrappedSecret)
}
