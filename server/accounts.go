package server

import (
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
)

func (s *Server) registerProfileRoutes() {
	s.handle(http.MethodGet, "/v1/auth/profile", s.bearerAccount(s.handleProfileGet))
	s.handle(http.MethodPatch, "/v1/auth/profile", s.bearer(s.handleProfilePatch))
	s.handle(http.MethodDelete, "/v1/auth/account", s.bearer(s.fresh(s.handleAccountDelete)))
}

type profileResponse struct {
	UserID      string  `json:"user_id"`
	Email       string  `json:"email"`
	DisplayName *string `json:"display_name,omitempty"`
	CreatedAt   string  `json:"created_at"`
}

func profileOf(a *kv.Account) profileResponse {
	return profileResponse{UserID: a.ID, Email: a.Email, DisplayName: a.DisplayName, CreatedAt: formatTime(a.CreatedAt)}
}

// handles "GET /v1/auth/profile"
func (s *Server) handleProfileGet(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return writeJSON(w, http.StatusOK, profileOf(callerAccount(r)))
}

type updateProfileRequest struct {
	DisplayName optionalString `json:"display_name"`
}

const maxDisplayName = 256

// validate: a display name is 1–256 characters with no control characters.
func (req *updateProfileRequest) validate() error {
	if v := req.DisplayName.Value; v != nil {
		n := utf8.RuneCountInString(*v)
		if n < 1 || n > maxDisplayName || !utf8.ValidString(*v) {
			return invalid("display_name", "display_name must be 1 to 256 characters; send null to clear it")
		}
		for _, c := range *v {
			if unicode.IsControl(c) {
				return invalid("display_name", "display_name must not contain control characters")
			}
		}
	}
	return nil
}

// handles "PATCH /v1/auth/profile": an absent display_name leaves it
// unchanged, null clears it, a string sets it; an empty body is {}.
func (s *Server) handleProfilePatch(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	var req updateProfileRequest
	if err := s.decodeJSONOrEmpty(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	var acct *kv.Account
	var err error
	if req.DisplayName.Set {
		acct, err = s.store.SetDisplayName(sess.AccountID, req.DisplayName.Value)
	} else {
		acct, err = s.store.Account(sess.AccountID)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, profileOf(acct))
}

type deleteAccountRequest struct {
	Password *string `json:"password"`
}

func (req *deleteAccountRequest) validate() error {
	if err := required("password", req.Password); err != nil {
		return err
	}
	return checkPresentedPassword("password", *req.Password)
}

// handles "DELETE /v1/auth/account": the caller deletes their own account,
// with a fresh session and the password (the lockout applies), for good
// (server/PROTOCOL.md §2).
func (s *Server) handleAccountDelete(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	var req deleteAccountRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	acct, err := s.verifyCallerPassword(r, sess, *req.Password)
	if err != nil {
		return err
	}
	if _, err := s.store.DeleteAccount(acct.Email); err != nil {
		return err
	}
	return noContent(w)
}
