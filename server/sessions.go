package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/fault"
)

func (s *Server) registerAuthRoutes() {
	s.handle(http.MethodPost, "/v1/auth/register", s.handleRegister)
	s.handle(http.MethodPost, "/v1/auth/login", s.handleLogin)
	s.handle(http.MethodPost, "/v1/auth/refresh", s.handleRefresh)
	s.handle(http.MethodPost, "/v1/auth/logout", s.handleLogout)
	s.handle(http.MethodPost, "/v1/auth/reauthenticate", s.bearer(s.handleReauthenticate))
	s.handle(http.MethodPost, "/v1/auth/password", s.bearer(s.handlePasswordChange))
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	ExpiresBy    int64  `json:"expires_by"`
}

// sessionGrant is a new session with its bearer secrets, ready to be stored
// and answered.
type sessionGrant struct {
	session *kv.Session
	access  string
	refresh string
}

// newSession mints a session for accountID opened by request r, with fresh
// tokens and lifetimes from the configuration. Advisory identifiers that are
// not usable are dropped.
func (s *Server) newSession(r *http.Request, accountID string, cohortHash, deviceID advisoryString) sessionGrant {
	now := s.now()
	end := kv.Deadline(now, s.cfg.SessionMaxAge) // no token outlives its chain
	sess := &kv.Session{
		ID:               s.newUUID(),
		AccountID:        accountID,
		ChainStartedAt:   now,
		CreatedAt:        now,
		AuthenticatedAt:  now,
		AccessExpiresAt:  earliest(kv.Deadline(now, s.cfg.AccessTTL), end),
		RefreshExpiresAt: earliest(kv.Deadline(now, s.cfg.RefreshTTL), end),
		UserAgent:        truncate(r.UserAgent(), 512),
		IPAddress:        s.clientAddr(r),
	}
	if usableCohortHash(string(cohortHash)) {
		sess.CohortHash = string(cohortHash)
	}
	if id, ok := parseUUID(string(deviceID)); ok {
		sess.DeviceID = id
	}
	var chain [16]byte
	s.mustRead(chain[:])
	return sessionGrant{session: sess, access: s.newAccessToken(accountID), refresh: s.newRefreshToken(chain)}
}

// newAccessToken returns a fresh access token of the account (kv.AccessToken).
func (s *Server) newAccessToken(accountID string) string {
	var secret [32]byte
	s.mustRead(secret[:])
	return kv.AccessToken(accountID, secret)
}

// newRefreshToken returns a fresh refresh token of chain (kv.RefreshToken).
func (s *Server) newRefreshToken(chain [16]byte) string {
	var secret [32]byte
	s.mustRead(secret[:])
	return kv.RefreshToken(chain, secret)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (g sessionGrant) response() tokenResponse {
	return tokenResponse{
		AccessToken:  g.access,
		RefreshToken: g.refresh,
		TokenType:    "Bearer",
		ExpiresBy:    g.session.AccessExpiresAt.Unix(),
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// credentials are the fields register and login share. validate returns
// the normalized email; passwordRule is the rule for a password being set
// (register) or presented (login).
type credentials struct {
	Email    *string `json:"email"`
	Password *string `json:"password"`
}

func (c *credentials) validate(passwordRule func(field, pw string) error) (email string, err error) {
	if err := required("email", c.Email); err != nil {
		return "", err
	}
	if err := required("password", c.Password); err != nil {
		return "", err
	}
	if email, err = normalizeEmail(*c.Email); err != nil {
		return "", err
	}
	return email, passwordRule("password", *c.Password)
}

// registerRequest is credentials and, in invite mode, the invitation.
type registerRequest struct {
	Email      *string `json:"email"`
	Password   *string `json:"password"`
	InviteCode *string `json:"invite_code"`
}

func (req *registerRequest) validate(passwordRule func(field, pw string) error) (email string, err error) {
	return (&credentials{Email: req.Email, Password: req.Password}).validate(passwordRule)
}

// allowAuth spends one of the client address's tokens for failed sign-ins
// and registrations (AuthRate, AuthBurst): 429 error.rate_limited with
// Retry-After when none is left, before any password is checked. A login
// gives its token back unless its password check failed (refundAuth).
func (s *Server) allowAuth(r *http.Request) error {
	if ok, retryAfter := s.authLimiter.Allow(s.rateKey(r)); !ok {
		return fault.LimitErrorf(fault.ECodeRateLimited, "auth-rate", retryAfter, "too many failed sign-ins and registrations from this address")
	}
	return nil
}

// refundAuth gives back the token a login took unless err says its
// password was wrong or its account unknown: the bucket is spent by failed
// sign-ins, never by a correct one (server/PROTOCOL.md §2), yet a guess is
// paid for before its password is checked, so parallel guesses from one
// address are bounded by the burst too.
func (s *Server) refundAuth(r *http.Request, err error) {
	if fault.ErrorCode(err) != fault.ECodeInvalidCredentials {
		s.authLimiter.Refund(s.rateKey(r))
	}
}

// spendAuth counts a failed sign-in against the client address after the
// fact: a second factor refused. The request is answered as it is either
// way; the next login from the address meets the empty bucket.
func (s *Server) spendAuth(r *http.Request) {
	s.authLimiter.Allow(s.rateKey(r))
}

// errClientGone answers a request whose client left while its password
// work waited or ran: nobody reads it, and it is no internal error.
var errClientGone = fault.Errorf(fault.ECodeMalformed, "the client closed the request before its answer")

// clientGone answers password work that ended because its request's
// context did (the client left) with errClientGone, and any other error as
// it is.
func clientGone(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errClientGone
	}
	return err
}

// handles "POST /v1/auth/register": the account is written only if its
// client still waits once the password is hashed, so a registration
// abandoned mid-hash creates nothing. In invite mode it spends the
// invitation in the transaction that creates the account
// (server/PROTOCOL.md §2).
func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if s.cfg.Registration == RegistrationClosed {
		return fault.Errorf(fault.ECodeRegistrationClosed, "registration is closed on this server")
	}
	if err := s.allowAuth(r); err != nil {
		return err
	}
	var req registerRequest
	if err := s.decodeAnonJSON(w, r, &req, maxAuthBody); err != nil {
		return err
	}
	email, err := req.validate(checkNewPassword)
	if err != nil {
		return err
	}
	invited := s.cfg.Registration == RegistrationInvite
	if invited {
		// Checked before the password is hashed, so a guessed code costs no
		// hash; the transaction that creates the account checks it again.
		if req.InviteCode == nil {
			return fault.Errorf(fault.ECodeInviteRequired, "registration needs a valid invitation")
		}
		if err := s.store.CheckInvite(*req.InviteCode, email); err != nil {
			return err
		}
	}
	hash, err := s.signin.Hash(r.Context(), *req.Password)
	if err == nil {
		err = r.Context().Err()
	}
	if err != nil {
		return clientGone(err)
	}
	acct := &kv.Account{ID: s.newUUID(), Email: email, PasswordHash: hash, CreatedAt: s.now(), QuotaBytes: s.cfg.DefaultQuota}
	grant := s.newSession(r, acct.ID, "", "")
	if invited {
		err = s.store.CreateInvitedAccount(*req.InviteCode, acct, grant.session, grant.access, grant.refresh)
	} else {
		err = s.store.CreateAccount(acct, grant.session, grant.access, grant.refresh)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, grant.response())
}

// loginRequest spells out the credential fields rather than embedding
// credentials: a decoding error names a field by its Go path, and an
// embedded struct would put "credentials." in front of the wire name.
type loginRequest struct {
	Email      *string        `json:"email"`
	Password   *string        `json:"password"`
	CohortHash advisoryString `json:"cohort_hash"`
	DeviceID   advisoryString `json:"device_id"`
}

func (req *loginRequest) validate(passwordRule func(field, pw string) error) (email string, err error) {
	return (&credentials{Email: req.Email, Password: req.Password}).validate(passwordRule)
}

// handles "POST /v1/auth/login"
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) (err error) {
	if err := s.allowAuth(r); err != nil {
		return err
	}
	defer func() { s.refundAuth(r, err) }()
	var req loginRequest
	if err := s.decodeAnonJSON(w, r, &req, maxAuthBody); err != nil {
		return err
	}
	email, err := req.validate(checkPresentedPassword)
	if err != nil {
		return err
	}
	acct, err := s.signin.Verify(r.Context(), email, *req.Password)
	if err != nil {
		return clientGone(err)
	}
	if acct.HasConfirmedFactor() {
		return s.challengeSecondFactor(w, acct)
	}
	grant := s.newSession(r, acct.ID, req.CohortHash, req.DeviceID)
	if err := s.store.LoginSucceeded(email, grant.session, grant.access, grant.refresh); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, grant.response())
}

type refreshRequest struct {
	RefreshToken *string `json:"refresh_token"`
}

// handles "POST /v1/auth/refresh"
func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req refreshRequest
	if err := s.decodeAnonJSON(w, r, &req, maxAuthBody); err != nil {
		return err
	}
	if err := required("refresh_token", req.RefreshToken); err != nil {
		return err
	}
	grant := s.newSession(r, "", "", "")
	if chain, ok := kv.RefreshChain(*req.RefreshToken); ok {
		// The next token of the same chain; a token minted before chains
		// begins one with the fresh id newSession drew.
		grant.refresh = s.newRefreshToken(chain)
	}
	if err := s.store.Refresh(*req.RefreshToken, grant.session, grant.access, grant.refresh, s.cfg.SessionMaxAge); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, grant.response())
}

// handles "POST /v1/auth/logout": idempotent; any presented token, live or
// not, gets 204, and only a missing token is 401.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	token := bearerToken(r)
	if token == "" {
		return fault.Errorf(fault.ECodeUnauthenticated, "an access token is required")
	}
	if err := s.store.Logout(token); err != nil {
		return err
	}
	return noContent(w)
}

type reauthenticateRequest struct {
	Password *string `json:"password"`
}

type reauthenticateResponse struct {
	AuthenticatedAt string `json:"authenticated_at"`
}

// verifyCallerPassword checks a password the signed-in caller presents
// again (reauthenticate, password change, account deletion) against its own
// account, counted and gated as a sign-in's check is (the lockout applies),
// and returns the account.
func (s *Server) verifyCallerPassword(r *http.Request, sess *kv.Session, password string) (*kv.Account, error) {
	acct, err := s.store.Account(sess.AccountID)
	if err != nil {
		return nil, err
	}
	if _, err := s.signin.Verify(r.Context(), acct.Email, password); err != nil {
		return nil, clientGone(err)
	}
	return acct, nil
}

// handles "POST /v1/auth/reauthenticate"
func (s *Server) handleReauthenticate(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	var req reauthenticateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := required("password", req.Password); err != nil {
		return err
	}
	if err := checkPresentedPassword("password", *req.Password); err != nil {
		return err
	}
	acct, err := s.verifyCallerPassword(r, sess, *req.Password)
	if err != nil {
		return err
	}
	at := s.now()
	if err := s.store.Reauthenticated(acct.Email, sess.ID, at); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, reauthenticateResponse{AuthenticatedAt: formatTime(at)})
}

type changePasswordRequest struct {
	CurrentPassword *string `json:"current_password"`
	NewPassword     *string `json:"new_password"`
}

func (req *changePasswordRequest) validate() error {
	if err := required("current_password", req.CurrentPassword); err != nil {
		return err
	}
	if err := required("new_password", req.NewPassword); err != nil {
		return err
	}
	if err := checkPresentedPassword("current_password", *req.CurrentPassword); err != nil {
		return err
	}
	return checkNewPassword("new_password", *req.NewPassword)
}

// handles "POST /v1/auth/password": verify the current password (a wrong
// one changes nothing), then in one transaction write the new hash, close
// every other session and keep the caller's pair working.
func (s *Server) handlePasswordChange(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	var req changePasswordRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	acct, err := s.verifyCallerPassword(r, sess, *req.CurrentPassword)
	if err != nil {
		return err
	}
	hash, err := s.signin.Hash(r.Context(), *req.NewPassword)
	if err != nil {
		return clientGone(err)
	}
	if err := s.store.ChangePassword(acct.ID, sess.ID, hash, s.now()); err != nil {
		return err
	}
	return noContent(w)
}
