package client

import (
	"context"
	"net/http"
	"net/url"
)

// Session is one entry of the account's session ledger
// (server/PROTOCOL.md §2).
type Session struct {
	SessionID       string `json:"session_id"`
	CreatedAt       string `json:"created_at"`
	AuthenticatedAt string `json:"authenticated_at"`
	LastActiveAt    string `json:"last_active_at"`
	UserAgent       string `json:"user_agent,omitempty"`
	IPAddress       string `json:"ip_address,omitempty"`
	CohortHash      string `json:"cohort_hash,omitempty"`
	DeviceID        string `json:"device_id,omitempty"`
	Current         bool   `json:"current"`
}

// Cohort is a device cohort the account was seen under.
type Cohort struct {
	CohortHash string `json:"cohort_hash"`
	FirstSeen  string `json:"first_seen"`
	LastSeen   string `json:"last_seen"`
}

// SessionsPage is one page of the ledger; NextCursor is empty on the last.
type SessionsPage struct {
	Sessions   []Session `json:"sessions"`
	Cohorts    []Cohort  `json:"cohorts"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// Sessions reads one page of the account's live sessions, from cursor (""
// for the first page).
func (c *Client) Sessions(ctx context.Context, cursor string) (SessionsPage, error) {
	var p SessionsPage
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	_, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/v1/auth/devices", query: q, bearer: true, retryable: true}, &p)
	return p, err
}

// RevokeSession ends one session of the account, the caller's own
// included.
func (c *Client) RevokeSession(ctx context.Context, sessionID string) error {
	_, err := c.doJSON(ctx, request{method: http.MethodDelete, path: "/v1/auth/devices/" + url.PathEscape(sessionID), bearer: true}, nil)
	return err
}

// RevokeAllChallenge asks for the single-use challenge global sign-out
// signs (server/PROTOCOL.md §4).
func (c *Client) RevokeAllChallenge(ctx context.Context) (string, error) {
	var a struct {
		Challenge string `json:"challenge"`
	}
	_, err := c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/logout/all/challenge", bearer: true}, &a)
	return a.Challenge, err
}

// RevokeAll ends every session of the account the challenge was issued to,
// with proof, the identity key's signature (standard base64); it returns
// how many sessions ended.
func (c *Client) RevokeAll(ctx context.Context, challenge, proof string) (int, error) {
	body, err := jsonBody(map[string]string{"challenge": challenge, "proof": proof})
	if err != nil {
		return 0, err
	}
	var a struct {
		Revoked int `json:"revoked"`
	}
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/logout/all", contentType: "application/json", body: body}, &a)
	return a.Revoked, err
}
