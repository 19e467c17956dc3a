package server

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"sealbox/kv/fault"
	"sealbox/server/hybridsig"
)

// FuzzRevokeAllRequest runs a global sign-out body through every decoding
// step the handler takes before and after the challenge is burned: strict
// JSON (400), the required challenge (422), then the proof decoder (401
// error.auth.proof_required). Nothing panics, each step refuses only with its
// own code, and an accepted proof is exactly 3373 bytes whose canonical
// encoding is the text sent. Seeds beyond these live in
// testdata/fuzz/FuzzRevokeAllRequest.
func FuzzRevokeAllRequest(f *testing.F) {
	key := hybridsig.NewDevKey([32]byte{1})
	good, _ := json.Marshal(map[string]string{
		"challenge": "sbx_ch_x",
		"proof":     key.SignBase64(hybridsig.RevokeAllSigningBytes("6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b", "sbx_ch_x")),
	})
	f.Add(good)
	f.Add([]byte(`{"challenge":"sbx_ch_x","proof":"AAAA"}`))
	f.Add([]byte(`{"challenge":"sbx_ch_x","proof":null}`))
	f.Add([]byte(`{"challenge":"sbx_ch_x","proof":"` + base64.StdEncoding.EncodeToString(make([]byte, hybridsig.SignatureSize)) + `"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req revokeAllRequest
		if err := decodeStrict(body, &req); err != nil {
			if code := fault.ErrorCode(err); code != fault.ECodeMalformed {
				t.Fatalf("decode refusal with code %q", code)
			}
			return
		}
		if err := req.validate(); err != nil {
			if code := fault.ErrorCode(err); code != fault.ECodeInvalid {
				t.Fatalf("validate refusal with code %q", code)
			}
			return
		}
		if req.Proof == nil {
			return // refused after the challenge is burned: TestRevokeAllMissingProof
		}
		sig, err := decodeProof(*req.Proof)
		if err != nil {
			if code := fault.ErrorCode(err); code != fault.ECodeProofRequired {
				t.Fatalf("proof refusal with code %q", code)
			}
			return
		}
		if len(sig) != hybridsig.SignatureSize {
			t.Fatalf("accepted a proof of %d bytes", len(sig))
		}
		if base64.StdEncoding.EncodeToString(sig) != *req.Proof {
			t.Fatal("accepted a non-canonical proof encoding")
		}
	})
}
