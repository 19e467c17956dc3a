package cli

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"sealbox/cli/admin"
	"sealbox/kv/fault"
)

// auditedAdmin is the operations the admin socket serves, each of which
// leaves an audit line in the server's log when it ends: which command,
// on which account (its id), and whether it failed. Never a password, an
// email address or anything else the operator passed: only what names the
// action. Listing and reading commands are logged too, so the log shows
// every use of the socket.
type auditedAdmin struct {
	next admin.Admin
	log  zerolog.Logger
}

// audit writes the line of command, on account id accountID ("" for none).
func (a auditedAdmin) audit(command, accountID string, err error) {
	e := a.log.Info()
	if err != nil {
		// Not the message: it may quote what the operator passed.
		e = a.log.Warn().Bool("failed", true)
		var fe *fault.Error
		if errors.As(err, &fe) {
			e = e.Str("code", fe.Code)
		}
	}
	e = e.Str("event", "admin").Str("command", command)
	if accountID != "" {
		e = e.Str("user_id", accountID)
	}
	e.Msg("admin command through the admin socket")
}

func (a auditedAdmin) Users(ctx context.Context) ([]admin.User, error) {
	u, err := a.next.Users(ctx)
	a.audit("users list", "", err)
	return u, err
}

func (a auditedAdmin) AddUser(ctx context.Context, email, password string) (admin.User, error) {
	u, err := a.next.AddUser(ctx, email, password)
	a.audit("users add", u.UserID, err)
	return u, err
}

func (a auditedAdmin) SetDisabled(ctx context.Context, email string, disabled bool) (admin.User, error) {
	u, err := a.next.SetDisabled(ctx, email, disabled)
	a.audit(map[bool]string{true: "users disable", false: "users enable"}[disabled], u.UserID, err)
	return u, err
}

func (a auditedAdmin) SetQuota(ctx context.Context, email string, quota int64) (admin.User, error) {
	u, err := a.next.SetQuota(ctx, email, quota)
	a.audit("users set-quota", u.UserID, err)
	return u, err
}

func (a auditedAdmin) ResetSecondFactor(ctx context.Context, email string) (admin.User, error) {
	u, err := a.next.ResetSecondFactor(ctx, email)
	a.audit("users reset-2fa", u.UserID, err)
	return u, err
}

func (a auditedAdmin) ResetDirectory(ctx context.Context, email string) (admin.User, error) {
	u, err := a.next.ResetDirectory(ctx, email)
	a.audit("users reset-directory", u.UserID, err)
	return u, err
}

func (a auditedAdmin) Backup(ctx context.Context, dest string, opts admin.BackupOptions, progress func(admin.Progress)) (admin.BackupReport, error) {
	rep, err := a.next.Backup(ctx, dest, opts, progress)
	a.audit("backup", "", err)
	return rep, err
}

func (a auditedAdmin) Check(ctx context.Context, deep bool) (admin.CheckReport, error) {
	rep, err := a.next.Check(ctx, deep)
	a.audit(map[bool]string{true: "check --deep", false: "check"}[deep], "", err)
	return rep, err
}

func (a auditedAdmin) GC(ctx context.Context, dryRun bool, grace time.Duration) (admin.GCReport, error) {
	rep, err := a.next.GC(ctx, dryRun, grace)
	a.audit(map[bool]string{true: "gc --dry-run", false: "gc"}[dryRun], "", err)
	return rep, err
}

func (a auditedAdmin) Invite(ctx context.Context, opts admin.InviteOptions) (admin.Invitation, error) {
	inv, err := a.next.Invite(ctx, opts)
	a.audit("users invite", "", err)
	return inv, err
}

func (a auditedAdmin) Invites(ctx context.Context) ([]admin.Invitation, error) {
	list, err := a.next.Invites(ctx)
	a.audit("users invites", "", err)
	return list, err
}

func (a auditedAdmin) Uninvite(ctx context.Context, id string) error {
	err := a.next.Uninvite(ctx, id)
	a.audit("users uninvite", "", err)
	return err
}

func (a auditedAdmin) SetPassword(ctx context.Context, email, password string) (admin.User, error) {
	u, err := a.next.SetPassword(ctx, email, password)
	a.audit("users set-password", u.UserID, err)
	return u, err
}

func (a auditedAdmin) DeleteUser(ctx context.Context, email string) (admin.User, error) {
	u, err := a.next.DeleteUser(ctx, email)
	a.audit("users delete", u.UserID, err)
	return u, err
}
