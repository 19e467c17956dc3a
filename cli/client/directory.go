package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// maxDirectory is a directory's bound (server/PROTOCOL.md §5).
const maxDirectory = 256 << 10

// DirectoryAnswer is an account's directory as the server serves it: the
// exact bytes the owner signed, the identity key the account pinned and
// the index of the directory's record in the transparency log.
type DirectoryAnswer struct {
	Bytes       []byte
	IdentityKey []byte
	Index       int64
}

// Directory reads the directory of the account userID;
// error.directory.not_found when it has none.
func (c *Client) Directory(ctx context.Context, userID string) (DirectoryAnswer, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/auth/devices/directory/" + url.PathEscape(userID), bearer: true, retryable: true})
	if err != nil {
		return DirectoryAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := readAll(resp, maxDirectory)
	if err != nil {
		return DirectoryAnswer{}, err
	}
	key, kerr := base64.StdEncoding.Strict().DecodeString(resp.Header.Get("X-Service-Identity-Key"))
	index, ierr := strconv.ParseInt(resp.Header.Get("X-Transparency-Index"), 10, 64)
	if kerr != nil || ierr != nil || index < 0 {
		return DirectoryAnswer{}, fmt.Errorf("GET %s: the answer lacks the identity key or the transparency index sealbox sends", resp.Request.URL.Path)
	}
	return DirectoryAnswer{Bytes: b, IdentityKey: key, Index: index}, nil
}
