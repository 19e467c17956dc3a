package admin

import (
	"context"
	"encoding/base64"
	"io"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/ids"
)

// InviteOptions are what the operator says of a new invitation.
type InviteOptions struct {
	// Email, when set, is the only address that may register with it.
	Email string `json:"email,omitempty"`
	// Expires is how long it stays valid.
	Expires time.Duration `json:"expires"`
	// QuotaBytes, when set, is the new account's quota instead of the
	// server's --default-quota (0: unlimited).
	QuotaBytes *int64 `json:"quota_bytes,omitempty"`
}

// Invitation is an outstanding invitation. Code is set only in the answer
// to Invite: the store keeps its hash, so nobody can show it again.
type Invitation struct {
	ID         string    `json:"id"`
	Code       string    `json:"code,omitempty"`
	Email      string    `json:"email,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	QuotaBytes *int64    `json:"quota_bytes,omitempty"`
}

// inviteCodePrefix is the type prefix of invitation codes, like the
// server's tokens (server/PROTOCOL.md §0).
const inviteCodePrefix = "sbx_in_"

func invitationOf(inv kv.Invite) Invitation {
	return Invitation{ID: inv.ID, Email: inv.Email, CreatedAt: inv.CreatedAt.UTC(), ExpiresAt: inv.ExpiresAt.UTC(), QuotaBytes: inv.QuotaBytes}
}

// Invite issues a single-use invitation to register while registration is
// in invite mode, and returns it with its code.
func (o *Ops) Invite(_ context.Context, opts InviteOptions) (Invitation, error) {
	if opts.Expires <= 0 {
		return Invitation{}, fault.Errorf(fault.ECodeInvalid, "an invitation must expire after a positive time")
	}
	if opts.QuotaBytes != nil && *opts.QuotaBytes < 0 {
		return Invitation{}, fault.Errorf(fault.ECodeInvalid, "the quota must not be negative")
	}
	inv := kv.Invite{ID: ids.UUID(o.Rand), ExpiresAt: kv.Deadline(o.Store.Now(), opts.Expires), QuotaBytes: opts.QuotaBytes}
	if opts.Email != "" {
		email, err := kv.NormalizeEmail(opts.Email)
		if err != nil {
			return Invitation{}, err
		}
		inv.Email = email
	}
	var secret [32]byte
	if _, err := io.ReadFull(o.Rand, secret[:]); err != nil {
		return Invitation{}, err
	}
	code := inviteCodePrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	if err := o.Store.CreateInvite(inv, code); err != nil {
		return Invitation{}, err
	}
	inv.CreatedAt = o.Store.Now()
	out := invitationOf(inv)
	out.Code = code
	return out, nil
}

// Invites lists the outstanding invitations, oldest first.
func (o *Ops) Invites(context.Context) ([]Invitation, error) {
	list, err := o.Store.Invites()
	if err != nil {
		return nil, err
	}
	out := make([]Invitation, 0, len(list))
	for _, inv := range list {
		out = append(out, invitationOf(inv))
	}
	return out, nil
}

// Uninvite revokes the outstanding invitation id.
func (o *Ops) Uninvite(_ context.Context, id string) error {
	return o.Store.RevokeInvite(id)
}

func (c *Client) Invite(ctx context.Context, opts InviteOptions) (Invitation, error) {
	var inv Invitation
	return inv, c.call(ctx, "/users/invite", args{Invite: &opts}, &inv)
}

func (c *Client) Invites(ctx context.Context) ([]Invitation, error) {
	var out []Invitation
	return out, c.call(ctx, "/users/invites", args{}, &out)
}

func (c *Client) Uninvite(ctx context.Context, id string) error {
	var none struct{}
	return c.call(ctx, "/users/uninvite", args{ID: id}, &none)
}
