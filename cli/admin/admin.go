// Package admin holds the operator's operations (user management, backup,
// integrity check, garbage collection). The same Ops serve two ways: the
// running server exposes them on a unix socket in the data directory, and
// the CLI runs them directly on the store when no server holds it.
package admin

import (
	"context"
	"io"
	"strings"
	"time"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/ids"
	"sealbox/server/password"
)

// Admin is what every admin subcommand calls: Ops directly, or Client
// through a running server's socket.
type Admin interface {
	Users(ctx context.Context) ([]User, error)
	AddUser(ctx context.Context, email, password string) (User, error)
	SetDisabled(ctx context.Context, email string, disabled bool) (User, error)
	SetQuota(ctx context.Context, email string, quota int64) (User, error)
	ResetSecondFactor(ctx context.Context, email string) (User, error)
	ResetDirectory(ctx context.Context, email string) (User, error)
	SetPassword(ctx context.Context, email, password string) (User, error)
	DeleteUser(ctx context.Context, email string) (User, error)
	Invite(ctx context.Context, opts InviteOptions) (Invitation, error)
	Invites(ctx context.Context) ([]Invitation, error)
	Uninvite(ctx context.Context, id string) error
	Backup(ctx context.Context, dest string, opts BackupOptions, progress func(Progress)) (BackupReport, error)
	Check(ctx context.Context, deep bool) (CheckReport, error)
	GC(ctx context.Context, dryRun bool, grace time.Duration) (GCReport, error)
}

// User is one row of `sealbox users list`.
type User struct {
	Email        string    `json:"email"`
	UserID       string    `json:"user_id"`
	CreatedAt    time.Time `json:"created_at"`
	LiveSessions int       `json:"live_sessions"`
	SecondFactor bool      `json:"second_factor"`
	Locked       bool      `json:"locked"`
	Disabled     bool      `json:"disabled"`
	QuotaBytes   int64     `json:"quota_bytes"`
	Albums       int       `json:"albums"`
	BlobsHeld    int       `json:"blobs_held"`
	BytesHeld    int64     `json:"bytes_held"`
	// RevokedSessions is set by operations that closed sessions.
	RevokedSessions int `json:"revoked_sessions,omitempty"`
	// Unchanged is set by an operation that found nothing to do (a second
	// factor reset on an account without one).
	Unchanged bool `json:"unchanged,omitempty"`
	// LogIndex is the transparency log index of the record a directory
	// reset or an account's deletion appended.
	LogIndex *int64 `json:"log_index,omitempty"`
	// UnheldBlobs counts the blobs a deletion left held by nobody, which gc
	// removes after its grace period.
	UnheldBlobs int `json:"unheld_blobs,omitempty"`
}

func userOf(row kv.UserSummary) User {
	a := row.Account
	return User{
		Email: a.Email, UserID: a.ID, CreatedAt: a.CreatedAt.UTC(), LiveSessions: row.LiveSessions,
		SecondFactor: a.HasConfirmedFactor(), Locked: row.Locked, Disabled: a.Disabled, QuotaBytes: a.QuotaBytes,
		Albums: row.Albums, BlobsHeld: row.BlobsHeld, BytesHeld: row.BytesHeld,
	}
}

// Ops runs the operations on an open data directory.
type Ops struct {
	DataDir string
	// StoreAt and BlobsAt name the record store and the blob store in
	// reports, never with a password.
	StoreAt, BlobsAt string
	Store            *kv.Store
	Blobs            blobs.Engine
	// Files opens and copies the store files a backup writes and reads.
	Files  StoreFiles
	Hasher *password.Hasher
	Rand   io.Reader
	// DefaultQuota is the quota of the accounts AddUser creates: the
	// server's --default-quota on its socket; 0 (unlimited) when the CLI
	// works on a store no server holds, which knows no server's flags.
	DefaultQuota int64
}

var _ Admin = (*Ops)(nil)

// Users lists every account, ordered by email.
func (o *Ops) Users(context.Context) ([]User, error) {
	rows, err := o.Store.UserSummaries()
	if err != nil {
		return nil, err
	}
	out := make([]User, 0, len(rows))
	for _, row := range rows {
		out = append(out, userOf(row))
	}
	return out, nil
}

// AddUser creates an account with no session: the operator's way to add
// users while registration is closed. The email and password rules are
// those of registration.
func (o *Ops) AddUser(ctx context.Context, email, pw string) (User, error) {
	email, err := kv.NormalizeEmail(email)
	if err != nil {
		return User{}, err
	}
	if err := kv.CheckNewPassword(pw); err != nil {
		return User{}, err
	}
	hash, err := o.Hasher.Hash(ctx, pw)
	if err != nil {
		return User{}, err
	}
	acct := &kv.Account{ID: ids.UUID(o.Rand), Email: email, PasswordHash: hash, CreatedAt: o.Store.Now(), QuotaBytes: o.DefaultQuota}
	if err := o.Store.AddAccount(acct); err != nil {
		return User{}, err
	}
	return o.user(email)
}

// SetPassword is the operator's password reset, for a user who forgot
// theirs: the new password (the rules of registration) replaces the old,
// every session and pending sign-in of the account closes and its lockout
// is cleared. The photos' keys are the client's, sealed under the
// encryption passphrase and the recovery key, never the sign-in password:
// the reset leaves them as they are, and the server cannot open them.
func (o *Ops) SetPassword(ctx context.Context, email, pw string) (User, error) {
	if err := kv.CheckNewPassword(pw); err != nil {
		return User{}, err
	}
	hash, err := o.Hasher.Hash(ctx, pw)
	if err != nil {
		return User{}, err
	}
	revoked, err := o.Store.SetPassword(normalize(email), hash)
	if err != nil {
		return User{}, err
	}
	u, err := o.user(email)
	u.RevokedSessions = revoked
	return u, err
}

// DeleteUser deletes the account for good, with everything that is its own
// (kv.Store.DeleteAccount), and reports it as it was just before.
func (o *Ops) DeleteUser(_ context.Context, email string) (User, error) {
	u, err := o.user(email)
	if err != nil {
		return User{}, err
	}
	d, err := o.Store.DeleteAccount(normalize(email))
	if err != nil {
		return User{}, err
	}
	u.UserID, u.RevokedSessions, u.UnheldBlobs, u.LogIndex = d.AccountID, d.RevokedSessions, d.UnheldBlobs, &d.LogIndex
	return u, nil
}

// SetDisabled disables (closing every session) or enables an account.
func (o *Ops) SetDisabled(_ context.Context, email string, disabled bool) (User, error) {
	revoked, err := o.Store.SetDisabled(normalize(email), disabled)
	if err != nil {
		return User{}, err
	}
	u, err := o.user(email)
	u.RevokedSessions = revoked
	return u, err
}

// ResetSecondFactor removes the account's second factor and closes its
// sessions.
func (o *Ops) ResetSecondFactor(_ context.Context, email string) (User, error) {
	removed, revoked, err := o.Store.ResetSecondFactor(normalize(email))
	if err != nil {
		return User{}, err
	}
	u, err := o.user(email)
	u.RevokedSessions, u.Unchanged = revoked, !removed
	return u, err
}

// ResetDirectory closes the account's sessions and clears its directory and
// pinned identity key, recording the reset in the transparency log; an
// account without a directory is Unchanged but for its sessions.
func (o *Ops) ResetDirectory(_ context.Context, email string) (User, error) {
	r, err := o.Store.ResetDirectory(normalize(email))
	if err != nil {
		return User{}, err
	}
	u, err := o.user(email)
	u.RevokedSessions, u.Unchanged = r.RevokedSessions, !r.Cleared
	if r.Cleared {
		u.LogIndex = &r.LogIndex
	}
	return u, err
}

// SetQuota sets the bytes the account may hold; 0 is unlimited.
func (o *Ops) SetQuota(_ context.Context, email string, quota int64) (User, error) {
	if quota < 0 {
		return User{}, fault.Errorf(fault.ECodeInvalid, "the quota must not be negative")
	}
	if err := o.Store.SetQuota(normalize(email), quota); err != nil {
		return User{}, err
	}
	return o.user(email)
}

func (o *Ops) user(email string) (User, error) {
	row, err := o.Store.UserSummary(normalize(email))
	if err != nil {
		return User{}, err
	}
	return userOf(row), nil
}

func normalize(email string) string { return strings.ToLower(strings.TrimSpace(email)) }
