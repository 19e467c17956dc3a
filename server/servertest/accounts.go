package servertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync/atomic"
	"testing"
)

// Password is the password of every account the helpers register.
const Password = "correct horse battery"

// Tokens is a token pair as the API answers it.
type Tokens struct {
	Access  string
	Refresh string
}

// TokensOf reads the token pair of a 200 answer to a registration, sign-in
// or refresh.
func TokensOf(tb testing.TB, r *Response) Tokens {
	tb.Helper()
	r.WantStatus(tb, http.StatusOK)
	m := r.JSON(tb)
	return Tokens{Access: m["access_token"].(string), Refresh: m["refresh_token"].(string)}
}

// Register creates an account and returns its first token pair.
func (c Client) Register(tb testing.TB, email string) Tokens {
	tb.Helper()
	return TokensOf(tb, c.Do(tb, Req{Method: "POST", Path: "/v1/auth/register",
		Body: map[string]any{"email": email, "password": Password}}))
}

// LoginBody is a sign-in with Password, with the members of extra added
// (a device_id, a user agent's fields).
func LoginBody(email string, extra ...map[string]any) map[string]any {
	body := map[string]any{"email": email, "password": Password}
	for _, e := range extra {
		maps.Copy(body, e)
	}
	return body
}

// Login signs in with Password and expects 200.
func (c Client) Login(tb testing.TB, email string, extra ...map[string]any) Tokens {
	tb.Helper()
	return TokensOf(tb, c.Do(tb, Req{Method: "POST", Path: "/v1/auth/login", Body: LoginBody(email, extra...)}))
}

// UserID returns the account id behind an access token.
func (c Client) UserID(tb testing.TB, access string) string {
	tb.Helper()
	r := c.Do(tb, Req{Method: "GET", Path: "/v1/auth/profile", Token: access}).WantStatus(tb, 200)
	return r.JSON(tb)["user_id"].(string)
}

// NewAlbum provisions a fresh album for the token's account and returns its id.
func (c Client) NewAlbum(tb testing.TB, access string) string {
	tb.Helper()
	id := fmt.Sprintf("%08x-abcd-4ef0-8000-000000000000", albumSeq.Add(1))
	c.Do(tb, Req{Method: "POST", Path: "/v1/albums", Token: access, Body: map[string]any{"album_id": id}}).WantStatus(tb, http.StatusCreated)
	return id
}

var albumSeq atomic.Uint32

// OpenUpload opens an upload session on the album and returns its id.
func (c Client) OpenUpload(tb testing.TB, access, albumID string) string {
	tb.Helper()
	r := c.Do(tb, Req{Method: "POST", Path: "/v1/albums/" + albumID + "/uploads", Token: access}).WantStatus(tb, http.StatusCreated)
	return r.JSON(tb)["upload_id"].(string)
}

// PutBlob uploads data under its own hash through the upload session.
func (c Client) PutBlob(tb testing.TB, access, uploadID string, data []byte) *Response {
	tb.Helper()
	return c.Do(tb, Req{Method: "PUT", Path: "/v1/uploads/" + uploadID + "/blobs/" + HashOf(data), Token: access,
		Body: data, ContentType: "application/octet-stream"})
}

// PutBlobChunked uploads data under its own hash without announcing its
// length (a MultiReader hides it, so the client sends chunks), with the
// Content-Type given ("" sends none).
func (c Client) PutBlobChunked(tb testing.TB, access, uploadID string, data []byte, contentType string) *Response {
	tb.Helper()
	req, err := http.NewRequest("PUT", c.BaseURL+"/v1/uploads/"+uploadID+"/blobs/"+HashOf(data), io.MultiReader(bytes.NewReader(data)))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+access)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	r, err := c.roundTrip(req)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// Upload stores data as a blob held by the token's account (in a new album
// and upload session) and returns its hash.
func (c Client) Upload(tb testing.TB, access string, data []byte) string {
	tb.Helper()
	up := c.OpenUpload(tb, access, c.NewAlbum(tb, access))
	c.PutBlob(tb, access, up, data).WantStatus(tb, http.StatusCreated)
	return HashOf(data)
}

// HashOf is the hex SHA-256 of data: a blob's name.
func HashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
