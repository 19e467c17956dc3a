package cli

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/pquerna/otp/totp"

	"sealbox/server/hybridsig"
)

// TestDevKeyMatchesTheVector: a key file holding the vector's seed gives the
// vector's public key and, over its user id and challenge, its signature, so
// `sealbox dev` signs exactly as the documented derivation says.
func TestDevKeyMatchesTheVector(t *testing.T) {
	raw, err := os.ReadFile("../testdata/revoke_all_vector.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Seed      string `json:"seed_hex"`
		UserID    string `json:"user_id"`
		Challenge string `json:"challenge"`
		PublicKey string `json:"public_key_base64"`
		Signature string `json:"signature_hex"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "vector.key")
	if err := os.WriteFile(keyFile, []byte(v.Seed+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := mustCLI(t, "", "dev", "pubkey", keyFile); strings.TrimSpace(out) != v.PublicKey {
		t.Fatalf("pubkey: got %.40q…, want the vector's", out)
	}
	out, _ := mustCLI(t, "", "dev", "sign-revoke-all", "--key", keyFile, "--user-id", v.UserID, "--challenge", v.Challenge)
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	if err != nil || hex.EncodeToString(sig) != v.Signature {
		t.Fatalf("sign-revoke-all: got %.40q…, want the vector's signature (%v)", out, err)
	}
}

// TestDevKeygen: keygen writes a private file, never over an existing one,
// and prints the public key the server accepts; what it signs verifies.
func TestDevKeygen(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "alice.key")
	out, _ := mustCLI(t, "", "dev", "keygen", keyFile)
	pub, err := hybridsig.DecodePublicKey(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("keygen printed a key the server refuses: %v", err)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	if again, _ := mustCLI(t, "", "dev", "pubkey", keyFile); again != out {
		t.Fatalf("pubkey %q differs from what keygen printed %q", again, out)
	}
	before, _ := os.ReadFile(keyFile)
	if _, _, err := runCLI(t, "", "dev", "keygen", keyFile); err == nil {
		t.Fatal("keygen overwrote an existing key")
	}
	if after, _ := os.ReadFile(keyFile); string(after) != string(before) {
		t.Fatal("a refused keygen changed the key file")
	}

	proof, _ := mustCLI(t, "", "dev", "sign-revoke-all", "--key", keyFile, "--user-id", "u", "--challenge", "sbx_ch_c")
	sig, err := hybridsig.DecodeSignature(strings.TrimSpace(proof))
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Verify(hybridsig.RevokeAllSigningBytes("u", "sbx_ch_c"), sig); err != nil {
		t.Fatalf("the proof does not verify: %v", err)
	}
	if _, _, err := runCLI(t, "", "dev", "pubkey", filepath.Join(t.TempDir(), "missing.key")); err == nil {
		t.Fatal("pubkey of a missing file succeeded")
	}
	bad := filepath.Join(t.TempDir(), "bad.key")
	os.WriteFile(bad, []byte("not hex"), 0o600)
	if _, _, err := runCLI(t, "", "dev", "pubkey", bad); err == nil || !strings.Contains(err.Error(), "dev keygen") {
		t.Fatalf("pubkey of a malformed file: %v", err)
	}
}

// TestDevCBOR: the directory carries its version and a signature that
// verifies over the rest; the intent and tombstone are the maps the upgrade
// endpoints read.
func TestDevCBOR(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "alice.key")
	out, _ := mustCLI(t, "", "dev", "keygen", keyFile)
	pub, _ := hybridsig.DecodePublicKey(strings.TrimSpace(out))

	dirBytes, _ := mustCLI(t, "", "dev", "directory", "--key", keyFile, "--version", "7")
	var dir map[string]any
	if err := cbor.Unmarshal([]byte(dirBytes), &dir); err != nil {
		t.Fatal(err)
	}
	if dir["directory_version"] != uint64(7) {
		t.Fatalf("directory_version: %v", dir["directory_version"])
	}
	sig := dir["signature"].([]byte)
	delete(dir, "signature")
	unsigned, _ := deterministicCBOR.Marshal(dir)
	if err := pub.Verify(unsigned, sig); err != nil {
		t.Fatalf("directory signature: %v", err)
	}
	if _, _, err := runCLI(t, "", "dev", "directory", "--key", keyFile, "--version", "0"); err == nil {
		t.Fatal("a directory of version 0 was written")
	}

	intent, _ := mustCLI(t, "", "dev", "upgrade-intent", "--intent-id", "1a7e0000-0000-4000-8000-00000000000a", "--to", "2026-09-01")
	var m map[string]string
	if err := cbor.Unmarshal([]byte(intent), &m); err != nil || m["intent_id"] != "1a7e0000-0000-4000-8000-00000000000a" || m["to_protocol_version"] != "2026-09-01" || len(m) != 2 {
		t.Fatalf("intent: %v %v", m, err)
	}
	tomb, _ := mustCLI(t, "", "dev", "tombstone", "--intent-id", "1a7e0000-0000-4000-8000-00000000000a")
	if err := cbor.Unmarshal([]byte(tomb), &m); err != nil || m["intent_id"] != "1a7e0000-0000-4000-8000-00000000000a" {
		t.Fatalf("tombstone: %v %v", m, err)
	}
}

// TestDevOp: a create and a replace chained by the SHA-256 of the create's
// manifest, as the README builds them.
func TestDevOp(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "alice.key")
	mustCLI(t, "", "dev", "keygen", keyFile)
	original := filepath.Join(dir, "original.sealed")
	meta := filepath.Join(dir, "meta.sealed")
	os.WriteFile(original, []byte("sealed original"), 0o600)
	os.WriteFile(meta, []byte("sealed metadata"), 0o600)
	const album, file, user = "0f0e0d0c-0b0a-4908-8706-050403020100", "a55e7000-0000-4000-8000-000000000001", "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"
	common := []string{"dev", "op", "--key", keyFile, "--album-id", album, "--file-id", file, "--user-id", user, "--original", original}

	type op struct {
		Envelope     map[string]any `json:"manifest_envelope"`
		ManifestCBOR string         `json:"manifest_cbor"`
		MetadataBlob *string        `json:"metadata_blob"`
	}
	decode := func(out string) op {
		var o op
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return o
	}
	create := decode(mustOut(t, append(common, "--metadata", meta)...))
	sum := sha256.Sum256([]byte("sealed original"))
	metaSum := sha256.Sum256([]byte("sealed metadata"))
	env := create.Envelope
	if env["action"] != "create" || env["created_by_user"] != user || env["album_id"] != album || env["file_id"] != file ||
		env["ciphertext_hash"] != hex.EncodeToString(sum[:]) || env["plaintext_size"] != float64(len("sealed original")) ||
		env["metadata_blob_hash"] != hex.EncodeToString(metaSum[:]) || env["protocol_version"] != "2026-09-01" {
		t.Fatalf("create envelope: %v", env)
	}
	if _, err := time.Parse(time.RFC3339, env["timestamp"].(string)); err != nil {
		t.Fatal(err)
	}
	if create.MetadataBlob == nil || *create.MetadataBlob != base64.StdEncoding.EncodeToString([]byte("sealed metadata")) {
		t.Fatalf("metadata_blob: %v", create.MetadataBlob)
	}
	manifest, err := base64.StdEncoding.DecodeString(create.ManifestCBOR)
	if err != nil || len(manifest) == 0 {
		t.Fatalf("manifest_cbor: %v", err)
	}
	head := sha256.Sum256(manifest)

	replace := decode(mustOut(t, append(common, "--action", "replace", "--prior", hex.EncodeToString(head[:]))...))
	if replace.Envelope["prior_provenance_hash"] != hex.EncodeToString(head[:]) || replace.Envelope["original_blob_hash"] != hex.EncodeToString(sum[:]) || replace.MetadataBlob != nil {
		t.Fatalf("replace: %v", replace.Envelope)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--action", "replace"}, "--prior"},
		{[]string{"--prior", hex.EncodeToString(head[:])}, "replace"},
		{[]string{"--action", "delete"}, "create or replace"},
	} {
		if _, _, err := runCLI(t, "", append(common, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("dev op %v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestDevTOTPCode: the code is the authenticator's for the URI's secret, at
// the clock shifted by --offset.
func TestDevTOTPCode(t *testing.T) {
	const secret = "JBSWY3DPEHPK3PXP"
	uri := "otpauth://totp/sealbox:alice@example.org?algorithm=SHA1&digits=6&issuer=sealbox&period=30&secret=" + secret
	at := time.Unix(1_800_000_000, 0)
	for _, shift := range []time.Duration{0, 30 * time.Second, -30 * time.Second} {
		got, err := totpCode(uri, at.Add(shift))
		want, _ := totp.GenerateCode(secret, at.Add(shift))
		if err != nil || got != want {
			t.Fatalf("offset %v: got %q (%v), want %q", shift, got, err, want)
		}
	}
	if next, _ := totpCode(uri, at.Add(30*time.Second)); next == mustTOTP(t, uri, at) {
		t.Fatal("the next step gave the same code")
	}
	out := mustOut(t, "dev", "totp-code", uri, "--offset", "30s")
	if len(strings.TrimSpace(out)) != 6 {
		t.Fatalf("totp-code printed %q", out)
	}
	for _, bad := range []string{"otpauth://hotp/x?secret=" + secret, "https://example.org", "otpauth://totp/x"} {
		if _, _, err := runCLI(t, "", "dev", "totp-code", bad); err == nil {
			t.Fatalf("totp-code %q succeeded", bad)
		}
	}
}

func mustTOTP(t *testing.T, uri string, at time.Time) string {
	t.Helper()
	code, err := totpCode(uri, at)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func mustOut(t *testing.T, args ...string) string {
	t.Helper()
	out, _ := mustCLI(t, "", args...)
	return out
}
