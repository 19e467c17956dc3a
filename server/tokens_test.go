package server_test

import (
	"net/http"
	"sealbox/server/servertest"
	"strings"
	"testing"
)

// TestServerMintedTokensInRequests holds every server-minted token or id a
// request carries to one rule. In a path: a value no token of the type can
// ever have is 400 error.request.malformed; a well-formed one the server does
// not know, of any length (tokens carry at least 256 bits, not exactly 256),
// is the resource's not-found answer. In a JSON body any string gets the
// endpoint's own refusal, never 400.
func TestServerMintedTokensInRequests(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	long := func(prefix string) string { return prefix + strings.Repeat("Zz9-_", 20) }
	const unknownUUID = "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"
	hash := servertest.HashOf([]byte("x"))
	tusCreate := func(upload string) servertest.Scenario {
		return servertest.Scenario{Method: "POST", Path: "/v1/uploads/" + upload + "/tus", Token: tok.Access,
			Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", tusMetadata(hash))}
	}
	put := func(upload string) servertest.Scenario {
		return servertest.Scenario{Method: "PUT", Path: "/v1/uploads/" + upload + "/blobs/" + hash, Token: tok.Access,
			Body: []byte("x"), ContentType: "application/octet-stream"}
	}
	relayPost := func(ch string) servertest.Scenario {
		return servertest.Scenario{Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": "to_enrollee", "payload": "x"}}
	}
	relayDrain := func(ch string) servertest.Scenario {
		return servertest.Scenario{Method: "GET", Path: channelPath(ch) + "?direction=to_enrollee"}
	}
	relayClose := func(ch string) servertest.Scenario {
		return servertest.Scenario{Method: "DELETE", Path: channelPath(ch), Token: tok.Access}
	}
	tusHead := func(transfer string) servertest.Scenario {
		return servertest.Scenario{Method: "HEAD", Path: "/v1/uploads/" + up + "/tus/" + transfer, Token: tok.Access, Header: tusHeaders()}
	}
	refresh := func(rt string) servertest.Scenario {
		return servertest.Scenario{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": rt}}
	}
	verifyTOTP := func(mfa string) servertest.Scenario {
		return servertest.Scenario{Method: "POST", Path: "/v1/auth/login/verify-totp", Body: map[string]any{"mfa_token": mfa, "totp_code": "123456"}}
	}
	revokeAll := func(ch string) servertest.Scenario {
		return servertest.Scenario{Method: "POST", Path: "/v1/auth/logout/all", Body: map[string]any{"challenge": ch, "proof": "AAAA"}}
	}
	redeem := func(code string) servertest.Scenario {
		return servertest.Scenario{Method: "POST", Path: "/v1/auth/devices/enroll/redeem", Body: map[string]any{"code": code}}
	}
	revokeSession := func(id string) servertest.Scenario {
		return servertest.Scenario{Method: "DELETE", Path: "/v1/auth/devices/" + id, Token: tok.Access}
	}
	directory := func(id string) servertest.Scenario {
		return servertest.Scenario{Method: "GET", Path: "/v1/auth/devices/directory/" + id, Token: tok.Access}
	}

	// want is sc as a row of the table: named, with the answer it wants.
	want := func(name string, sc servertest.Scenario, status int, code string) servertest.Scenario {
		sc.Name, sc.WantStatus, sc.WantCode = name, status, code
		return sc
	}

	servertest.RunScenarios(t, ts.Client, []servertest.Scenario{
		want("upload id (tus create), unknown, 256 bits", tusCreate("sbx_up_"+strings.Repeat("A", 43)), 404, "error.upload.not_found"),
		want("upload id (tus create), unknown, longer", tusCreate(long("sbx_up_")), 404, "error.upload.not_found"),
		want("upload id (tus create), unknown, shorter", tusCreate("sbx_up_short"), 404, "error.upload.not_found"),
		want("upload id (tus create), no random part", tusCreate("sbx_up_"), 400, "error.request.malformed"),
		want("upload id (tus create), outside the alphabet", tusCreate("sbx_up_a.b"), 400, "error.request.malformed"),
		want("upload id (tus create), another token type", tusCreate(long("sbx_at_")), 400, "error.request.malformed"),
		want("upload id (PUT), unknown, longer", put(long("sbx_up_")), 404, "error.upload.not_found"),
		want("upload id (PUT), malformed", put("sbx_up_%2B"), 400, "error.request.malformed"),
		want("upload id (DELETE), unknown, longer", servertest.Scenario{Method: "DELETE", Path: "/v1/uploads/" + long("sbx_up_"), Token: tok.Access}, 404, "error.upload.not_found"),
		want("upload id (DELETE), malformed", servertest.Scenario{Method: "DELETE", Path: "/v1/uploads/up", Token: tok.Access}, 400, "error.request.malformed"),
		want("channel id (post), unknown", relayPost(long("sbx_rl_")), 404, "error.relay.channel_not_found"),
		want("channel id (post), malformed", relayPost("sbx_rl_a~b"), 400, "error.request.malformed"),
		want("channel id (drain), unknown", relayDrain("sbx_rl_short"), 404, "error.relay.channel_not_found"),
		want("channel id (drain), malformed", relayDrain("channel"), 400, "error.request.malformed"),
		want("channel id (close), unknown", relayClose(long("sbx_rl_")), 404, "error.relay.channel_not_found"),
		want("channel id (close), malformed", relayClose("sbx_rl_"), 400, "error.request.malformed"),
		want("transfer id, unknown", servertest.Scenario{Method: "PATCH", Path: "/v1/uploads/" + up + "/tus/" + unknownUUID, Token: tok.Access,
			Header: tusHeaders("Upload-Offset", "0"), Body: []byte("x"), ContentType: "application/offset+octet-stream"}, 404, "error.transfer.not_found"),
		want("transfer id, malformed", servertest.Scenario{Method: "PATCH", Path: "/v1/uploads/" + up + "/tus/not-a-uuid", Token: tok.Access,
			Header: tusHeaders("Upload-Offset", "0"), Body: []byte("x"), ContentType: "application/offset+octet-stream"}, 400, "error.request.malformed"),
		want("session id, unknown", revokeSession(unknownUUID), 404, "error.session.not_found"),
		want("session id, malformed", revokeSession("session"), 400, "error.request.malformed"),
		want("user id, unknown", directory(unknownUUID), 404, "error.directory.not_found"),
		want("user id, malformed", directory("user"), 400, "error.request.malformed"),
		want("refresh token, unknown", refresh(long("sbx_rt_")), 401, "error.auth.session_expired"),
		want("refresh token, any string", refresh("x"), 401, "error.auth.session_expired"),
		want("mfa_token, unknown", verifyTOTP("sbx_mfa_"+strings.Repeat("A", 43)), 401, "error.auth.challenge_expired"),
		want("mfa_token, unknown, longer", verifyTOTP(long("sbx_mfa_")), 401, "error.auth.challenge_expired"),
		want("mfa_token, any string", verifyTOTP("x"), 401, "error.auth.challenge_expired"),
		want("revoke-all challenge, unknown", revokeAll(long("sbx_ch_")), 401, "error.auth.challenge_expired"),
		want("revoke-all challenge, any string", revokeAll("x"), 401, "error.auth.challenge_expired"),
		want("enrollment code, unknown", redeem(long("sbx_en_")), 404, "error.enrollment.code_refused"),
		want("enrollment code, any string", redeem("x"), 404, "error.enrollment.code_refused"),
	})
	// A HEAD answer carries no body: the status alone.
	ts.Do(t, tusHead(unknownUUID).Req()).WantStatus(t, http.StatusNotFound)
	ts.Do(t, tusHead("nope").Req()).WantStatus(t, http.StatusBadRequest)
}
