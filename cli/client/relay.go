package client

import (
	"context"
	"net/http"
	"net/url"
)

// EnrollmentCode is a code that links a new device (server/PROTOCOL.md §6):
// the full spelling for a QR code or a paste, and the numeric fallback to
// type.
type EnrollmentCode struct {
	Code         string `json:"code"`
	TextFallback string `json:"text_fallback"`
	ExpiresAt    string `json:"expires_at"`
}

// Channel is a relay channel between two devices.
type Channel struct {
	ChannelID string `json:"channel_id"`
	ExpiresAt string `json:"expires_at"`
}

// Relay mailboxes (server/PROTOCOL.md §6).
const (
	ToInitiator = "to_initiator"
	ToEnrollee  = "to_enrollee"
)

// IssueEnrollmentCode asks for a code; the session must be fresh
// (error.auth.reauth_required otherwise).
func (c *Client) IssueEnrollmentCode(ctx context.Context) (EnrollmentCode, error) {
	var e EnrollmentCode
	_, err := c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/devices/enroll", bearer: true}, &e)
	return e, err
}

// RedeemEnrollmentCode spends either spelling of a code for the channel,
// without a session.
func (c *Client) RedeemEnrollmentCode(ctx context.Context, code string) (Channel, error) {
	var ch Channel
	body, err := jsonBody(map[string]string{"code": code})
	if err != nil {
		return ch, err
	}
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/devices/enroll/redeem", contentType: "application/json", body: body}, &ch)
	return ch, err
}

// EnrollmentChannel is the channel the caller's code opened, for the device
// that issued it (server/PROTOCOL.md §17); error.relay.channel_not_found
// until the code is redeemed.
func (c *Client) EnrollmentChannel(ctx context.Context, code string) (Channel, error) {
	body, err := jsonBody(map[string]string{"code": code})
	if err != nil {
		return Channel{}, err
	}
	var ch Channel
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/enroll/channel", contentType: "application/json", body: body, bearer: true, retryable: true}, &ch)
	return ch, err
}

// RelayPost appends payload to the channel's mailbox direction.
func (c *Client) RelayPost(ctx context.Context, channelID, direction, payload string) error {
	body, err := jsonBody(map[string]string{"direction": direction, "payload": payload})
	if err != nil {
		return err
	}
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/auth/devices/enroll/channel/" + url.PathEscape(channelID), contentType: "application/json", body: body}, nil)
	return err
}

// RelayDrain takes every payload waiting in the channel's mailbox
// direction; they are gone from the server once answered, so it is not
// retried.
func (c *Client) RelayDrain(ctx context.Context, channelID, direction string) ([]string, error) {
	var d struct {
		Payloads []string `json:"payloads"`
	}
	_, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/v1/auth/devices/enroll/channel/" + url.PathEscape(channelID), query: url.Values{"direction": {direction}}}, &d)
	return d.Payloads, err
}

// CloseChannel closes the channel the caller's code opened.
func (c *Client) CloseChannel(ctx context.Context, channelID string) error {
	_, err := c.doJSON(ctx, request{method: http.MethodDelete, path: "/v1/auth/devices/enroll/channel/" + url.PathEscape(channelID), bearer: true, retryable: true}, nil)
	return err
}
