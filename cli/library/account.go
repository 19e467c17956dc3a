package library

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
	"sealbox/kv/fault"
	"sealbox/server/ids"
)

// EscrowArgon2 are the Argon2id parameters new escrows are made with; tests
// lower them (the escrow stores them, so an escrow opens with its own).
var EscrowArgon2 = sealed.DefaultArgon2

// Signup registers email (with the invitation's code on a server that
// registers by invitation) on the server c talks to and makes the account's
// keys: a master key and an identity key, sealed in the escrow under the
// password and under a recovery key, which is returned to be shown once
// and never stored. The server is sent the login secret (cli/sealed/FORMAT.md
// §5.3), never the password, and the identity key is pinned by a first
// directory publish (FORMAT.md §14), which lists this device and its key.
// The session and the keys are saved in p.
//
// With noPasswordEscrow the escrow keeps the master key under the recovery
// key only (cli/sealed/FORMAT.md §5.4): whoever holds the server's data has
// no password to guess, and a new device gets the keys from a linked device
// or the recovery key.
//
// The keys are saved, marked unfinished, before the server is sent the
// escrow, and the recovery key is returned only once the server holds
// everything: a failure after the escrow was stored (the directory refused,
// the connection lost, the profile's disk full) would otherwise lose the
// recovery key it is sealed under, and without a password slot the master
// key with it. Signup run again with the same email and password on such a
// profile finishes it (finishSignup). A profile signed in to an account is
// refused otherwise, before anything is sent: the new account is another
// (signedInElsewhere).
func Signup(ctx context.Context, p *Profile, c *client.Client, email, password, invite string, noPasswordEscrow bool) (sealed.RecoveryKey, error) {
	if old, err := p.Session(); err == nil {
		keys, kerr := p.Keys()
		if kerr != nil || !keys.SignupUnfinished || old.Email != email {
			return sealed.RecoveryKey{}, signedInElsewhere(old)
		}
		// Signed in again with the password: the first run's session may
		// have ended, and signIn checks that the account is the same.
		if err := signIn(ctx, p, c, email, password, ""); err != nil {
			return sealed.RecoveryKey{}, err
		}
		s, err := p.Session()
		if err != nil {
			return sealed.RecoveryKey{}, err
		}
		return finishSignup(ctx, p, c, s, keys, password, noPasswordEscrow)
	}
	tokens, err := c.Register(ctx, email, sealed.LoginSecret(email, password), invite)
	if err != nil {
		return sealed.RecoveryKey{}, err
	}
	s := &Session{Server: c.BaseURL(), Email: email, DeviceID: ids.UUID(rand.Reader), Tokens: tokens}
	if err := saveSession(ctx, p, c, s, nil); err != nil {
		return sealed.RecoveryKey{}, err
	}
	device, err := sealed.NewDeviceKey()
	if err != nil {
		return sealed.RecoveryKey{}, err
	}
	keys := &Keys{Master: sealed.NewMasterKey(), Identity: sealed.NewIdentitySeed(), Device: [32]byte(device.Bytes()), SignupUnfinished: true}
	if err := p.SaveKeys(keys); err != nil {
		return sealed.RecoveryKey{}, err
	}
	return finishSignup(ctx, p, c, s, keys, password, noPasswordEscrow)
}

// finishSignup gives the server what keys, saved unfinished in p, need
// there: their escrow, sealed under the password (unless noPasswordEscrow)
// and under a new recovery key, which replaces any escrow an earlier run
// stored under a recovery key it never showed; then the first directory
// publish, which pins the identity key. It saves the keys as finished and
// returns the recovery key. Every step may have been done by an earlier
// run: the escrow is replaced, and a directory already published under
// the pinned key (a version conflict: only the identity key's holder
// publishes one) is this device's.
func finishSignup(ctx context.Context, p *Profile, c *client.Client, s *Session, keys *Keys, password string, noPasswordEscrow bool) (sealed.RecoveryKey, error) {
	device, err := sealed.ParseDeviceKey(keys.Device[:])
	if err != nil {
		return sealed.RecoveryKey{}, err
	}
	recovery := sealed.NewRecoveryKey()
	escrow, err := sealed.NewEscrow(sealed.AccountSecrets{Master: keys.Master, Identity: keys.Identity}, password, recovery, EscrowArgon2)
	if err == nil && noPasswordEscrow {
		escrow, err = sealed.RemovePassphrase(escrow)
	}
	if err != nil {
		return sealed.RecoveryKey{}, err
	}
	if err := c.PutEscrow(ctx, escrow); err != nil {
		return sealed.RecoveryKey{}, unfinished(fmt.Errorf("store the account's escrow: %w", err))
	}
	directory, err := sealed.SignDirectory(sealed.Directory{Version: 1, UserID: s.UserID,
		Devices: []sealed.DirectoryDevice{{DeviceID: s.DeviceID, PublicKey: device.PublicKey()}}}, keys.Identity.Identity())
	if err != nil {
		return sealed.RecoveryKey{}, err
	}
	err = c.PublishDirectory(ctx, directory, keys.Identity.Identity().PublicKey())
	if err != nil && client.CodeOf(err) != fault.ECodeDirectoryVersionConflict {
		return sealed.RecoveryKey{}, unfinished(fmt.Errorf("pin the account's identity key: %w", err))
	}
	keys.SignupUnfinished = false
	if err := p.SaveKeys(keys); err != nil {
		return sealed.RecoveryKey{}, unfinished(err)
	}
	return recovery, nil
}

// ErrSignupUnfinished is a profile whose signup failed after it made the
// account's keys: no recovery key of them was shown, and the escrow may
// not be on the server.
var ErrSignupUnfinished = errors.New("the signup on this device did not finish: run sealbox client signup again with the same email and password to finish it (logout would remove the keys it made, which may be on this device only)")

// unfinished is a signup's failure after the keys were saved: it says how
// to finish.
func unfinished(err error) error { return fmt.Errorf("%w; %w", err, ErrSignupUnfinished) }

// refuseUnfinished refuses a sign-in that would replace or remove the keys
// of an unfinished signup, the only copy of them.
func refuseUnfinished(p *Profile) error {
	if keys, err := p.Keys(); err == nil && keys.SignupUnfinished {
		return ErrSignupUnfinished
	}
	return nil
}

// ErrKeysNotOpened is a password that signs in but does not open the
// account's keys: the operator reset a forgotten password.
var ErrKeysNotOpened = errors.New("the password signs in but does not open the account's keys: use sealbox client recover with the recovery key")

// ErrCodeNeeded is a sign-in to an account with a second factor made
// without its code: give --code.
var ErrCodeNeeded = errors.New("this account asks for a second-factor code: give it with --code")

// Login signs in on this device with the password (and the second
// factor's code when the account has one), opens the escrow with the
// password and saves the session and the keys in p.
func Login(ctx context.Context, p *Profile, c *client.Client, email, password, code string) error {
	if err := refuseUnfinished(p); err != nil {
		return err
	}
	if err := signIn(ctx, p, c, email, password, code); err != nil {
		return err
	}
	escrow, err := c.Escrow(ctx)
	if client.CodeOf(err) == fault.ECodeEscrowNotFound {
		return errors.New("this account has no escrow: it was not made by sealbox client signup, so this device cannot open its photos")
	}
	if err != nil {
		return err
	}
	secrets, err := sealed.OpenEscrowWithPassphrase(escrow, password)
	if errors.Is(err, sealed.ErrNoPassphraseSlot) {
		return ErrNoPasswordEscrow
	}
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrKeysNotOpened, err)
	}
	return p.SaveKeys(&Keys{Master: secrets.Master, Identity: secrets.Identity})
}

// ErrNoPasswordEscrow is a password sign-in to an account whose escrow
// keeps the keys under the recovery key only: this device is signed in but
// holds no keys.
var ErrNoPasswordEscrow = errors.New("signed in, but this account keeps its keys under the recovery key only (no password escrow): get them from a device that holds them (sealbox client link there, then sealbox client login --code here), or with sealbox client recover and the recovery key")

// signIn signs in with the password (and the second factor's code) and
// saves the session in p; the keys are not touched. On a profile signed in
// to another account it is refused (signedInElsewhere); the same account
// again, at whatever address of its server, is taken.
func signIn(ctx context.Context, p *Profile, c *client.Client, email, password, code string) error {
	deviceID := ids.UUID(rand.Reader)
	old, _ := p.Session() // nil when signed out; a damaged one is replaced
	if old != nil && old.DeviceID != "" {
		deviceID = old.DeviceID
	}
	secret := sealed.LoginSecret(email, password)
	tokens, challenge, err := c.Login(ctx, email, secret, deviceID)
	if err != nil {
		return err
	}
	if challenge != nil {
		if code == "" {
			return ErrCodeNeeded
		}
		if tokens, err = c.VerifyTOTP(ctx, challenge, code, deviceID); err != nil {
			return err
		}
	}
	s := &Session{Server: c.BaseURL(), Email: email, DeviceID: deviceID, Tokens: tokens}
	return saveSession(ctx, p, c, s, old)
}

// saveSession fills in the account's user id and saves s, and keeps it up
// to date with every token refresh from now on. old is the session the
// profile was signed in with, if any: one of another account is kept, and
// s is ended on the server and refused.
func saveSession(ctx context.Context, p *Profile, c *client.Client, s, old *Session) error {
	prof, err := c.Profile(ctx)
	if err != nil {
		return err
	}
	s.UserID = prof.UserID
	if old != nil && old.UserID != s.UserID {
		_ = c.Logout(ctx)
		return signedInElsewhere(old)
	}
	if err := p.SaveSession(s); err != nil {
		return err
	}
	KeepTokens(p, c, s)
	return nil
}

// signedInElsewhere refuses a sign-in to another account on a profile
// signed in to one, as the profile holds one account: its index (the
// albums, their keys, the files as sent) is that account's, and a sync for
// the other would skip every file it lists as sent. logout removes it;
// another --profile keeps both.
func signedInElsewhere(s *Session) error {
	return fmt.Errorf("this device is signed in as %s on %s: run sealbox client logout first (or give another --profile)", s.Email, s.Server)
}

// KeepTokens makes c act for s and write every refreshed token pair to p,
// so the next run starts from the newest.
func KeepTokens(p *Profile, c *client.Client, s *Session) {
	c.SetTokens(s.Tokens)
	c.OnTokens = func(t client.Tokens) {
		s.Tokens = t
		// A failure here loses only this refresh: the next run signs in
		// again when its refresh token is refused.
		_ = p.SaveSession(s)
	}
}

// ChangePassword changes the password on this device and on the server:
// the escrow's password slot is sealed again under the new password (its
// recovery slot stays as it is), then the server's login secret is changed.
// The server's password change ends every other session of the account.
// Should the change fail after the new escrow was stored, the old escrow
// is put back, so the password that signs in always opens the keys.
func ChangePassword(ctx context.Context, c *client.Client, s *Session, current, next string) error {
	oldSecret, newSecret := sealed.LoginSecret(s.Email, current), sealed.LoginSecret(s.Email, next)
	old, err := c.Escrow(ctx)
	if err != nil {
		return err
	}
	if !sealed.HasPassphraseSlot(old) {
		// No password opens the escrow: only the sign-in changes.
		if err := c.Reauthenticate(ctx, oldSecret); err != nil {
			return err
		}
		return c.ChangePassword(ctx, oldSecret, newSecret)
	}
	secrets, err := sealed.OpenEscrowWithPassphrase(old, current)
	if err != nil {
		return fmt.Errorf("the current password does not open the account's keys: %w", err)
	}
	escrow, err := sealed.ReplacePassphrase(old, secrets, next)
	if err != nil {
		return err
	}
	// The escrow is behind the freshness window.
	if err := c.Reauthenticate(ctx, oldSecret); err != nil {
		return err
	}
	if err := c.PutEscrow(ctx, escrow); err != nil {
		return err
	}
	if err := c.ChangePassword(ctx, oldSecret, newSecret); err != nil {
		if perr := c.PutEscrow(ctx, old); perr != nil {
			return fmt.Errorf("%w; and the old escrow could not be put back (%v): use sealbox client recover", err, perr)
		}
		return err
	}
	return nil
}

// Recover signs in with a password the escrow does not open (a forgotten
// password the operator reset, cli/sealed/FORMAT.md §5.3) and opens the
// keys with the recovery key instead; a new escrow is sealed under the
// password and the same recovery key, and the keys are saved in p.
func Recover(ctx context.Context, p *Profile, c *client.Client, email, password, code string, recovery sealed.RecoveryKey) error {
	err := Login(ctx, p, c, email, password, code)
	if !errors.Is(err, ErrKeysNotOpened) && !errors.Is(err, ErrNoPasswordEscrow) {
		return err // signed in and opened (nothing to recover), or not signed in
	}
	escrow, err := c.Escrow(ctx)
	if err != nil {
		return err
	}
	secrets, err := sealed.OpenEscrowWithRecoveryKey(escrow, recovery)
	if err != nil {
		return fmt.Errorf("the recovery key does not open the account's keys: %w", err)
	}
	info, err := sealed.ParseEscrow(escrow)
	if err != nil {
		return err
	}
	fresh, err := sealed.NewEscrow(secrets, password, recovery, info.Argon2)
	if err == nil && !sealed.HasPassphraseSlot(escrow) {
		// An account without password escrow stays so.
		fresh, err = sealed.RemovePassphrase(fresh)
	}
	if err != nil {
		return err
	}
	if err := c.PutEscrow(ctx, fresh); err != nil {
		return err
	}
	return p.SaveKeys(&Keys{Master: secrets.Master, Identity: secrets.Identity})
}

// SetPasswordEscrow switches the account's escrow (cli/sealed/FORMAT.md
// §5.4): on, the master key is sealed again under the password beside the
// recovery key; off, the password slot is removed and only the recovery key
// (and devices that hold the keys) open it. The recovery slot stays byte for
// byte either way. The password, checked by the server, opens the escrow's
// freshness window.
func SetPasswordEscrow(ctx context.Context, c *client.Client, s *Session, keys *Keys, password string, on bool) error {
	escrow, err := c.Escrow(ctx)
	if err != nil {
		return err
	}
	if on {
		escrow, err = sealed.ReplacePassphrase(escrow, sealed.AccountSecrets{Master: keys.Master, Identity: keys.Identity}, password)
	} else {
		escrow, err = sealed.RemovePassphrase(escrow)
	}
	if err != nil {
		return err
	}
	if err := c.Reauthenticate(ctx, sealed.LoginSecret(s.Email, password)); err != nil {
		return err
	}
	return c.PutEscrow(ctx, escrow)
}
