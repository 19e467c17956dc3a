package server

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/pquerna/otp/totp"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/secrets"
)

func (s *Server) registerTOTPRoutes() {
	s.handle(http.MethodPost, "/v1/auth/totp/enroll", s.bearer(s.handleTOTPEnroll))
	s.handle(http.MethodPost, "/v1/auth/totp/verify-enrollment", s.bearer(s.handleTOTPVerifyEnrollment))
	s.handle(http.MethodPost, "/v1/auth/totp/disable", s.bearer(s.handleTOTPDisable))
	s.handle(http.MethodPost, "/v1/auth/login/verify-totp", s.handleLoginVerifyTOTP)
}

// TOTP as server/PROTOCOL.md §3 fixes it (the code check is
// secrets.MatchTOTP).
const (
	// totpSecretLen is 160 bits, RFC 4226's recommended length for SHA-1.
	totpSecretLen = 20
	totpIssuer    = "sealbox"

	mfaTTL = 5 * time.Minute
	// mfaMaxFailures wrong codes burn a sign-in challenge.
	mfaMaxFailures = 5
)

type enrollmentResponse struct {
	ProvisioningURI string `json:"provisioning_uri"`
}

// handles "POST /v1/auth/totp/enroll": a new secret, pending until a code
// confirms it; a pending one is replaced. The URI is the only time the
// secret leaves the server.
func (s *Server) handleTOTPEnroll(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	secret := make([]byte, totpSecretLen)
	s.mustRead(secret)
	sealed, err := s.secrets.SealTOTP(sess.AccountID, secret)
	if err != nil {
		return err
	}
	acct, err := s.store.EnrollFactor(sess.AccountID, kv.FactorTOTP, sealed)
	if err != nil {
		return err
	}
	key, err := totp.Generate(totp.GenerateOpts{
		Issuer: totpIssuer, AccountName: acct.Email, Secret: secret,
		Period: secrets.TOTPPeriod, Digits: secrets.TOTPOpts.Digits, Algorithm: secrets.TOTPOpts.Algorithm,
	})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, enrollmentResponse{ProvisioningURI: key.URL()})
}

type codeRequest struct {
	TOTPCode *string `json:"totp_code"`
}

func (req *codeRequest) validate() error {
	return checkTOTPCode(req.TOTPCode)
}

func checkTOTPCode(code *string) error {
	if err := required("totp_code", code); err != nil {
		return err
	}
	if !isTOTPCode(*code) {
		return invalid("totp_code", "totp_code must be six digits")
	}
	return nil
}

// isTOTPCode: exactly six ASCII digits.
func isTOTPCode(s string) bool { return isDigits(s, 6) }

// handles "POST /v1/auth/totp/verify-enrollment"
func (s *Server) handleTOTPVerifyEnrollment(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return s.applyCode(w, r, s.store.ConfirmFactor)
}

// codeLimit bounds the wrong codes of an account's signed-in code checks.
func (s *Server) codeLimit() kv.CodeLimit {
	return kv.CodeLimit{Attempts: s.cfg.TOTPAttempts, Window: s.cfg.TOTPAttemptWindow, Name: "totp-attempts"}
}

// handles "POST /v1/auth/totp/disable": a live code is required; a session
// alone is not enough.
func (s *Server) handleTOTPDisable(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return s.applyCode(w, r, s.store.DisableFactor)
}

// applyCode is the body of the bearer endpoints that take a CodeRequest:
// the store change apply runs only if the code is accepted, and answers 204;
// past the account's limit of wrong codes, 429 without checking the code.
func (s *Server) applyCode(w http.ResponseWriter, r *http.Request, apply func(accountID string, proof kv.Proof, limit kv.CodeLimit) error) error {
	sess := caller(r)
	var req codeRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	if err := apply(sess.AccountID, s.totpProof(*req.TOTPCode), s.codeLimit()); err != nil {
		return err
	}
	return noContent(w)
}

type secondFactorChallenge struct {
	MFAToken  string `json:"mfa_token"`
	ExpiresBy int64  `json:"expires_by"`
}

// challengeSecondFactor answers a login whose password was verified for an
// account with a confirmed second factor: 202 and a challenge. No session,
// cohort or refresh token exists until verify-totp succeeds.
//
// A challenge counts as one failed attempt against the address until
// VerifyLogin completes the sign-in and clears the count: otherwise someone
// holding the password but not the authenticator could sign in over and
// over and guess codes without bound. As it is, each challenge allows at
// most mfaMaxFailures guesses and the lockout bounds the challenges, so it
// bounds code guessing too. The price: a user who abandons LockoutFailures
// challenges in a row is locked like one who mistyped the password.
func (s *Server) challengeSecondFactor(w http.ResponseWriter, acct *kv.Account) error {
	if err := s.signin.CountFailure(acct.Email); err != nil {
		return err
	}
	token := s.newToken(prefixMFA)
	expires := kv.Deadline(s.now(), mfaTTL)
	if err := s.store.CreateMFAChallenge(token, acct.ID, expires); err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, secondFactorChallenge{MFAToken: token, ExpiresBy: expires.Unix()})
}

type verifyLoginRequest struct {
	MFAToken   *string        `json:"mfa_token"`
	TOTPCode   *string        `json:"totp_code"`
	CohortHash advisoryString `json:"cohort_hash"`
	DeviceID   advisoryString `json:"device_id"`
}

func (req *verifyLoginRequest) validate() error {
	if err := required("mfa_token", req.MFAToken); err != nil {
		return err
	}
	if err := checkTOTPCode(req.TOTPCode); err != nil {
		return err
	}
	if !isMFAToken(*req.MFAToken) {
		// Refused before it takes the store's single write lock: a flood of
		// garbage tokens must not queue real sign-ins.
		return fault.Errorf(fault.ECodeChallengeExpired, "the sign-in challenge is unknown or expired; sign in again")
	}
	return nil
}

// mfaTokenLen is the prefix plus 256 bits in unpadded base64url.
var mfaTokenLen = len(prefixMFA) + base64.RawURLEncoding.EncodedLen(32)

// isMFAToken reports whether s has the exact shape newToken gives an
// mfa_token: the prefix, then the canonical encoding of 32 bytes. The
// length of the decoded bytes is checked too, because the decoder skips
// newlines inside its input.
func isMFAToken(s string) bool {
	if len(s) != mfaTokenLen || !strings.HasPrefix(s, prefixMFA) {
		return false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s[len(prefixMFA):])
	return err == nil && len(raw) == 32
}

// handles "POST /v1/auth/login/verify-totp": the second half of a sign-in
// answered 202. The session opens here, with the advisory identifiers of
// this request.
func (s *Server) handleLoginVerifyTOTP(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req verifyLoginRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	grant := s.newSession(r, "", req.CohortHash, req.DeviceID)
	if err := s.store.VerifyLogin(*req.MFAToken, s.totpProof(*req.TOTPCode), mfaMaxFailures, grant.session, grant.access, grant.refresh); err != nil {
		if code := fault.ErrorCode(err); code == fault.ECodeInvalidCode || code == fault.ECodeCodeReplayed {
			s.spendAuth(r)
		}
		return err
	}
	return writeJSON(w, http.StatusOK, grant.response())
}

// totpProof lets the store check code against a sealed secret inside the
// transaction that advances the replay ledger.
func (s *Server) totpProof(code string) kv.TOTPProof {
	return func(accountID string, sealed []byte, now time.Time) (uint64, bool, error) {
		secret, err := s.secrets.OpenTOTP(accountID, sealed)
		if err != nil {
			return 0, false, err
		}
		return secrets.MatchTOTP(secret, code, now)
	}
}
