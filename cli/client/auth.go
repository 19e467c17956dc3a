package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// tokenAnswer is the server's token pair (server/PROTOCOL.md §2).
type tokenAnswer struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresBy    int64  `json:"expires_by"`
}

func (a tokenAnswer) tokens() Tokens {
	return Tokens{Access: a.AccessToken, Refresh: a.RefreshToken, ExpiresBy: time.Unix(a.ExpiresBy, 0)}
}

// keep makes t the session's tokens and hands them to OnTokens.
func (c *Client) keep(t Tokens) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keepLocked(t)
}

func (c *Client) keepLocked(t Tokens) {
	c.tokens = t
	if c.OnTokens != nil {
		c.OnTokens(t)
	}
}

// Challenge is a sign-in whose password was right on an account with a
// second factor: the code goes to VerifyTOTP with its MFAToken.
type Challenge struct {
	MFAToken  string `json:"mfa_token"`
	ExpiresBy int64  `json:"expires_by"`
}

type registration struct {
	Email      string `json:"email"`
	Password   string `json:"password"`
	InviteCode string `json:"invite_code,omitempty"`
}

// Register creates an account and signs in to it; invite is the
// invitation's code on a server that registers by invitation ("" where
// registration is open). A registration is never sent twice: a second try
// of one that reached the server would answer that the account exists.
func (c *Client) Register(ctx context.Context, email, password, invite string) (Tokens, error) {
	body, err := jsonBody(registration{Email: email, Password: password, InviteCode: invite})
	if err != nil {
		return Tokens{}, err
	}
	var a tokenAnswer
	if _, err := c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/register", contentType: "application/json", body: body}, &a); err != nil {
		return Tokens{}, err
	}
	c.keep(a.tokens())
	return a.tokens(), nil
}

type loginBody struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	DeviceID string `json:"device_id,omitempty"`
}

// Login signs in. With a second factor on the account it returns a
// Challenge instead of tokens (the server's 202). deviceID, a UUID the
// client keeps, is advisory: the server shows it in the session list.
func (c *Client) Login(ctx context.Context, email, password, deviceID string) (Tokens, *Challenge, error) {
	body, err := jsonBody(loginBody{Email: email, Password: password, DeviceID: deviceID})
	if err != nil {
		return Tokens{}, nil, err
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/auth/login", contentType: "application/json", body: body})
	if err != nil {
		return Tokens{}, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusAccepted {
		var ch Challenge
		if err := decodeAnswer(resp, &ch); err != nil {
			return Tokens{}, nil, err
		}
		return Tokens{}, &ch, nil
	}
	var a tokenAnswer
	if err := decodeAnswer(resp, &a); err != nil {
		return Tokens{}, nil, err
	}
	c.keep(a.tokens())
	return a.tokens(), nil, nil
}

type verifyBody struct {
	MFAToken string `json:"mfa_token"`
	TOTPCode string `json:"totp_code"`
	DeviceID string `json:"device_id,omitempty"`
}

// VerifyTOTP completes a sign-in Login answered with a Challenge.
func (c *Client) VerifyTOTP(ctx context.Context, ch *Challenge, code, deviceID string) (Tokens, error) {
	body, err := jsonBody(verifyBody{MFAToken: ch.MFAToken, TOTPCode: code, DeviceID: deviceID})
	if err != nil {
		return Tokens{}, err
	}
	var a tokenAnswer
	if _, err := c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/login/verify-totp", contentType: "application/json", body: body}, &a); err != nil {
		return Tokens{}, err
	}
	c.keep(a.tokens())
	return a.tokens(), nil
}

// refreshAfter replaces the tokens with a refreshed pair unless another
// request already did since it sent stale: a refresh token is spent by its
// use, and presenting it twice would end the session (reuse detection).
func (c *Client) refreshAfter(ctx context.Context, stale string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tokens.Access != stale {
		return nil
	}
	body, err := jsonBody(map[string]string{"refresh_token": c.tokens.Refresh})
	if err != nil {
		return err
	}
	var a tokenAnswer
	if _, err := c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/refresh", contentType: "application/json", body: body}, &a); err != nil {
		if code := CodeOf(err); code != "" {
			return fmt.Errorf("%w: %w", ErrSignedOut, err)
		}
		return err
	}
	c.keepLocked(a.tokens())
	return nil
}

// ErrSignedOut wraps the refusal of a session that can no longer be
// refreshed (expired, revoked, signed out elsewhere): sign in again.
var ErrSignedOut = errors.New("the session has ended; sign in again")

// Logout ends the session on the server. Whatever the server answers, the
// client forgets its tokens.
func (c *Client) Logout(ctx context.Context) error {
	_, err := c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/logout", bearer: true}, nil)
	c.keep(Tokens{})
	return err
}

// Profile is the signed-in account.
type Profile struct {
	UserID      string  `json:"user_id"`
	Email       string  `json:"email"`
	DisplayName *string `json:"display_name"`
	CreatedAt   string  `json:"created_at"`
}

// Profile reads the signed-in account.
func (c *Client) Profile(ctx context.Context) (Profile, error) {
	var p Profile
	_, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/v1/auth/profile", bearer: true, retryable: true}, &p)
	return p, err
}

// Reauthenticate proves the password again, for the operations behind the
// freshness window (escrow, password change).
func (c *Client) Reauthenticate(ctx context.Context, password string) error {
	body, err := jsonBody(map[string]string{"password": password})
	if err != nil {
		return err
	}
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/reauthenticate", contentType: "application/json", body: body, bearer: true}, nil)
	return err
}

// ChangePassword changes the account's password; the caller's session
// stays, every other one ends.
func (c *Client) ChangePassword(ctx context.Context, current, next string) error {
	body, err := jsonBody(map[string]string{"current_password": current, "new_password": next})
	if err != nil {
		return err
	}
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/password", contentType: "application/json", body: body, bearer: true}, nil)
	return err
}

// PutEscrow stores the account's escrow blob (at most 64 KiB), replacing
// the one before. Sending the same bytes twice is harmless.
func (c *Client) PutEscrow(ctx context.Context, escrow []byte) error {
	_, err := c.doJSON(ctx, request{method: http.MethodPut, path: "/v1/auth/escrow", contentType: "application/octet-stream",
		body: func() (io.Reader, error) { return bytes.NewReader(escrow), nil }, bearer: true, retryable: true}, nil)
	return err
}

// PublishDirectory publishes the account's device directory (CBOR, the
// exact bytes the owner signed) and, on the first publish, pins the
// account's identity key, given as its public key (server/PROTOCOL.md §5).
func (c *Client) PublishDirectory(ctx context.Context, directory, identityKey []byte) error {
	h := http.Header{"X-Service-Identity-Key": {base64.StdEncoding.EncodeToString(identityKey)}}
	_, err := c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/devices/directory", header: h, contentType: "application/cbor",
		body: func() (io.Reader, error) { return bytes.NewReader(directory), nil }, bearer: true}, nil)
	return err
}

// maxEscrow is the escrow blob's bound (server/PROTOCOL.md §5).
const maxEscrow = 64 << 10

// Escrow reads the account's escrow blob.
func (c *Client) Escrow(ctx context.Context) ([]byte, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/auth/escrow", bearer: true, retryable: true})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readAll(resp, maxEscrow)
}
