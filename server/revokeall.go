package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/hybridsig"
)

func (s *Server) registerRevokeAllRoutes() {
	s.handle(http.MethodPost, "/v1/auth/logout/all/challenge", s.bearer(s.handleRevokeAllChallenge))
	s.handle(http.MethodPost, "/v1/auth/logout/all", s.handleRevokeAll)
}

// revokeChallengeTTL is the revoke-all challenge lifetime (server/PROTOCOL.md §4).
const revokeChallengeTTL = 5 * time.Minute

type revokeChallengeResponse struct {
	Challenge string `json:"challenge"`
	ExpiresAt string `json:"expires_at"`
}

// handles "POST /v1/auth/logout/all/challenge": a session token gets a
// challenge, never the sign-out itself; that needs the identity key's
// signature over the challenge.
func (s *Server) handleRevokeAllChallenge(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	challenge := s.newToken(prefixChallenge)
	expiresAt := kv.Deadline(s.now(), revokeChallengeTTL)
	if err := s.store.PutRevokeChallenge(sess.AccountID, challenge, expiresAt); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, revokeChallengeResponse{Challenge: challenge, ExpiresAt: formatTime(expiresAt)})
}

type revokeAllRequest struct {
	Challenge *string `json:"challenge"`
	Proof     *string `json:"proof"`
}

// validate requires the challenge only. A missing or null proof is not a
// 422: the interface makes a missing master-key proof 401 (Conventions 5),
// so it is refused like a malformed one, after the challenge is burned.
func (req *revokeAllRequest) validate() error {
	return required("challenge", req.Challenge)
}

type revokeAllResponse struct {
	Revoked int `json:"revoked"`
}

// handles "POST /v1/auth/logout/all": the account is the one the challenge
// was issued to. The challenge is burned, in its own committed transaction,
// before the proof is even decoded, so each challenge buys exactly one
// verification whatever the proof holds.
func (s *Server) handleRevokeAll(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req revokeAllRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	accountID, pinned, err := s.store.BurnRevokeChallenge(*req.Challenge)
	if err != nil {
		return err
	}
	if err := verifyRevokeAllProof(accountID, *req.Challenge, pinned, req.Proof); err != nil {
		return err
	}
	n, err := s.store.DeleteAccountSessions(accountID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, revokeAllResponse{Revoked: n})
}

// verifyRevokeAllProof checks proof, the hybrid signature in padded standard
// base64, over revoke_all_signing_bytes(accountID, challenge) by the pinned
// identity key. No pinned key, no proof (nil), a malformed proof and a bad
// signature are all 401 error.auth.proof_required.
func verifyRevokeAllProof(accountID, challenge string, pinned []byte, proof *string) error {
	if pinned == nil {
		return fault.Errorf(fault.ECodeProofRequired, "no identity key is pinned for this account; publish a device directory first")
	}
	if proof == nil {
		return fault.Errorf(fault.ECodeProofRequired, "the request carries no proof")
	}
	sig, err := decodeProof(*proof)
	if err != nil {
		return err
	}
	pk, err := hybridsig.ParsePublicKey(pinned)
	if err != nil {
		// The store holds only keys that parsed at publish: this is corruption.
		return err
	}
	if pk.Verify(hybridsig.RevokeAllSigningBytes(accountID, challenge), sig) != nil {
		return fault.Errorf(fault.ECodeProofRequired, "the proof does not verify with the account's identity key")
	}
	return nil
}

// decodeProof decodes a proof's wire form: the 3373-byte hybrid signature as
// canonical padded standard base64.
func decodeProof(proof string) ([]byte, error) {
	sig, err := hybridsig.DecodeSignature(proof)
	if err != nil {
		return nil, fault.Errorf(fault.ECodeProofRequired, "the proof must be the 3373-byte hybrid signature in padded standard base64")
	}
	return sig, nil
}
