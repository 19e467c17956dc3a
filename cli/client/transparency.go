package client

import (
	"context"
	"net/http"
)

// maxTransparency bounds a transparency answer read into memory: the log's
// key, a checkpoint with its cosignatures, a hash tile (256 hashes) or an
// entry bundle (256 records) are all well under it.
const maxTransparency = 1 << 20

// TransparencyKey reads the transparency log's verifier key
// (server/PROTOCOL.md §16), without a token.
func (c *Client) TransparencyKey(ctx context.Context) ([]byte, error) {
	return c.transparency(ctx, "/v1/transparency/key")
}

// Checkpoint reads the checkpoint the server serves, signed note and
// cosignatures (server/PROTOCOL.md §16), without a token.
func (c *Client) Checkpoint(ctx context.Context) ([]byte, error) {
	return c.transparency(ctx, "/v1/transparency/checkpoint")
}

// TransparencyTile reads the hash tile or entry bundle at tilePath, the
// part of its path after /v1/transparency/tile/ ("0/001.p/12",
// "entries/000"), without a token. A tile of a log too small for it is an
// *Error of status 404.
func (c *Client) TransparencyTile(ctx context.Context, tilePath string) ([]byte, error) {
	return c.transparency(ctx, "/v1/transparency/tile/"+tilePath)
}

func (c *Client) transparency(ctx context.Context, path string) ([]byte, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: path, retryable: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readAll(resp, maxTransparency)
}
