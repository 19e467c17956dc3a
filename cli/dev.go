package cli

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/spf13/cobra"

	"sealbox/blobs"
	"sealbox/server"
	"sealbox/server/hybridsig"
)

// The dev commands make the client-side material a real client makes (an
// identity key, a revoke-all proof, a directory, an upgrade intent and
// tombstone, a lifecycle op, a second-factor code), so the README's examples
// and a client developer's experiments run with the binary alone. The server
// never needs them, and they are no substitute for a client: their keys sit
// in a plain file and their CBOR layouts are illustrations, since the server
// reads nothing of a directory but directory_version and nothing of a
// manifest at all.
func newDevCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "For tests and measuring: make client-side test material, or fill and measure a test instance (the server never needs them)",
		Long: `The dev commands make what a real client would send: a hybrid identity key,
a revoke-all proof, a device directory, an upgrade intent and tombstone, a
lifecycle op, and the current code of a second factor. They exist for client
developers and tests, and for the README's examples. The server never needs
them. A key made here is kept unencrypted in a file: never use one to protect
real photos.

fill and measure are for measuring: fill makes a large test library in a new
data directory it creates, and measure times an instance serving it (the
README's Scale section). Both refuse any store dev fill did not create.`,
	}
	cmd.AddCommand(newDevKeygenCmd(), newDevPubkeyCmd(), newDevSignRevokeAllCmd(), newDevDirectoryCmd(),
		newDevUpgradeIntentCmd(), newDevTombstoneCmd(), newDevOpCmd(), newDevTOTPCodeCmd(), newDevFillCmd(), newDevMeasureCmd())
	return cmd
}

// deterministicCBOR is the core deterministic encoding (RFC 8949 §4.2.1),
// the one revoke_all_signing_bytes uses, so the same input always gives the
// same bytes.
var deterministicCBOR = func() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic("cli: " + err.Error())
	}
	return em
}()

func newDevKeygenCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "keygen FILE",
		Short: "Write a new hybrid identity key (Ed25519 + ML-DSA-65) to FILE and print its public key",
		Long: `keygen writes a fresh 32-byte seed, hex, to FILE (mode 0600; an existing file
is never overwritten) and prints the public key in the X-Service-Identity-Key
form: standard base64 of Ed25519 (32 bytes) || ML-DSA-65 (1952 bytes).
Both halves derive from the seed as testdata/revoke_all_vector.json describes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var seed [32]byte
			if _, err := rand.Read(seed[:]); err != nil {
				return err
			}
			f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(f, hex.EncodeToString(seed[:])); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), hybridsig.NewDevKey(seed).PublicKeyBase64())
			return err
		},
	}
}

func newDevPubkeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pubkey FILE",
		Short: "Print the public key of a key made by keygen, in the X-Service-Identity-Key form",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := readDevKey(args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), key.PublicKeyBase64())
			return err
		},
	}
}

// readDevKey reads a key file written by keygen.
func readDevKey(path string) (*hybridsig.DevKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("%s is not a key made by `sealbox dev keygen` (64 hex characters)", path)
	}
	return hybridsig.NewDevKey([32]byte(raw)), nil
}

func newDevSignRevokeAllCmd() *cobra.Command {
	var keyFile, userID, challenge string
	cmd := &cobra.Command{
		Use:   "sign-revoke-all",
		Short: "Print the proof for POST /v1/auth/logout/all: the hybrid signature of revoke_all_signing_bytes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, err := readDevKey(keyFile)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), key.SignBase64(hybridsig.RevokeAllSigningBytes(userID, challenge)))
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "key file made by keygen")
	cmd.Flags().StringVar(&userID, "user-id", "", "the account's user_id")
	cmd.Flags().StringVar(&challenge, "challenge", "", "the challenge from POST /v1/auth/logout/all/challenge")
	markRequired(cmd, "key", "user-id", "challenge")
	return cmd
}

func newDevDirectoryCmd() *cobra.Command {
	var keyFile string
	var version uint64
	cmd := &cobra.Command{
		Use:   "directory",
		Short: "Write a signed device directory (CBOR) to standard output",
		Long: `directory writes a deterministic CBOR map with directory_version, the
identity key, an empty device list and, under "signature", the hybrid signature
of the same map without it. The layout is an illustration: the server reads
only directory_version and stores the bytes verbatim.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if version < 1 {
				return errors.New("--version must be at least 1")
			}
			key, err := readDevKey(keyFile)
			if err != nil {
				return err
			}
			dir := map[string]any{
				"directory_version": version,
				"identity_key":      key.PublicKey(),
				"devices":           []any{},
			}
			unsigned, err := deterministicCBOR.Marshal(dir)
			if err != nil {
				return err
			}
			dir["signature"] = key.Sign(unsigned)
			return writeCBOR(cmd.OutOrStdout(), dir)
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "key file made by keygen")
	cmd.Flags().Uint64Var(&version, "version", 1, "directory_version: above the stored one")
	markRequired(cmd, "key")
	return cmd
}

func newDevUpgradeIntentCmd() *cobra.Command {
	var intentID, to string
	cmd := &cobra.Command{
		Use:   "upgrade-intent",
		Short: "Write an upgrade intent (CBOR) for POST /v1/albums/{album_id}/upgrade to standard output",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeCBOR(cmd.OutOrStdout(), map[string]any{"intent_id": intentID, "to_protocol_version": to})
		},
	}
	cmd.Flags().StringVar(&intentID, "intent-id", "", "the intent's id, a UUID")
	cmd.Flags().StringVar(&to, "to", server.DefaultConfig().ProtocolMax, "to_protocol_version, YYYY-MM-DD")
	markRequired(cmd, "intent-id")
	return cmd
}

func newDevTombstoneCmd() *cobra.Command {
	var intentID string
	cmd := &cobra.Command{
		Use:   "tombstone",
		Short: "Write an upgrade tombstone (CBOR) for POST /v1/albums/{album_id}/upgrade/commit to standard output",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeCBOR(cmd.OutOrStdout(), map[string]any{"intent_id": intentID, "committed_at": time.Now().UTC().Format(time.RFC3339)})
		},
	}
	cmd.Flags().StringVar(&intentID, "intent-id", "", "the intent's id, a UUID")
	markRequired(cmd, "intent-id")
	return cmd
}

func newDevOpCmd() *cobra.Command {
	var o devOp
	cmd := &cobra.Command{
		Use:   "op",
		Short: "Write a lifecycle op (JSON) for POST /v1/albums/{album_id}/ops to standard output",
		Long: `op writes the body of a lifecycle op. The envelope names the caller
(--user-id), the sealed original (--original, which the caller must already
hold), and for a replace the head it continues from (--prior: the SHA-256 of the
previous manifest's bytes, which 'jq -r .manifest_cbor op.json | base64 -d |
sha256sum' prints). manifest_cbor is a deterministic CBOR map of the envelope
and its hybrid signature by --key; the server stores it verbatim and never
parses it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := o.build(time.Now())
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(body)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.keyFile, "key", "", "key file made by keygen, to sign the manifest")
	f.StringVar(&o.action, "action", "create", "create or replace")
	f.StringVar(&o.albumID, "album-id", "", "the album")
	f.StringVar(&o.fileID, "file-id", "", "the asset, a UUID")
	f.StringVar(&o.userID, "user-id", "", "created_by_user: the caller's user_id")
	f.StringVar(&o.deviceID, "device-id", "00000000-0000-4000-8000-000000000000", "created_by_device, a UUID")
	f.StringVar(&o.protocol, "protocol", server.DefaultConfig().ProtocolMax, "protocol_version: the album's pinned protocol")
	f.StringVar(&o.original, "original", "", "file holding the sealed original")
	f.StringVar(&o.metadata, "metadata", "", "file holding the sealed metadata blob, sent inline (optional)")
	f.StringVar(&o.prior, "prior", "", "prior_provenance_hash of a replace")
	markRequired(cmd, "key", "album-id", "file-id", "user-id", "original")
	return cmd
}

// devOp is what `sealbox dev op` is told.
type devOp struct {
	keyFile, action, albumID, fileID, userID, deviceID, protocol, original, metadata, prior string
}

// build returns the op body, stamped with now.
func (o devOp) build(now time.Time) (map[string]any, error) {
	key, err := readDevKey(o.keyFile)
	if err != nil {
		return nil, err
	}
	originalHash, originalSize, err := hashFile(o.original)
	if err != nil {
		return nil, err
	}
	env := map[string]any{
		"crypto_suite_id":   1,
		"protocol_version":  o.protocol,
		"album_id":          o.albumID,
		"file_id":           o.fileID,
		"amk_version":       0,
		"ciphertext_hash":   originalHash,
		"plaintext_size":    originalSize,
		"chunk_size":        65536,
		"key_mode":          "derived",
		"created_by_user":   o.userID,
		"created_by_device": o.deviceID,
		"client_version":    "sealbox-dev/" + server.Version,
		"timestamp":         now.UTC().Format(time.RFC3339),
		"action":            o.action,
	}
	switch o.action {
	case "create":
		if o.prior != "" {
			return nil, errors.New("--prior belongs to a replace")
		}
	case "replace":
		if o.prior == "" {
			return nil, errors.New("a replace needs --prior, the SHA-256 of the previous manifest")
		}
		env["prior_provenance_hash"] = o.prior
		env["original_blob_hash"] = originalHash
	default:
		return nil, fmt.Errorf("--action %q: want create or replace", o.action)
	}
	body := map[string]any{"manifest_envelope": env}
	if o.metadata != "" {
		meta, err := os.ReadFile(o.metadata)
		if err != nil {
			return nil, err
		}
		env["metadata_blob_hash"] = blobs.AddressOf(meta)
		body["metadata_blob"] = base64.StdEncoding.EncodeToString(meta)
	}
	signed, err := deterministicCBOR.Marshal(env)
	if err != nil {
		return nil, err
	}
	manifest, err := deterministicCBOR.Marshal(map[string]any{"manifest": signed, "signature": key.Sign(signed)})
	if err != nil {
		return nil, err
	}
	body["manifest_cbor"] = base64.StdEncoding.EncodeToString(manifest)
	return body, nil
}

// hashFile returns the content address and the size of a file.
func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := blobs.NewHash()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return blobs.Address(h), n, nil
}

func newDevTOTPCodeCmd() *cobra.Command {
	var offset time.Duration
	cmd := &cobra.Command{
		Use:   "totp-code URI",
		Short: "Print the current code of the otpauth:// URI that POST /v1/auth/totp/enroll answered",
		Long: `totp-code prints what an authenticator app would show for the URI. The
server accepts each 30-second step once and one step of skew either way, so
--offset 30s gives the next step's code (and -30s the previous one): three
calls in quick succession with -30s, 0 and 30s give three codes it accepts in
that order.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := totpCode(args[0], time.Now().Add(offset))
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), code)
			return err
		},
	}
	cmd.Flags().DurationVar(&offset, "offset", 0, "shift the clock by this much (30s: the next step's code)")
	return cmd
}

// totpCode returns the code an authenticator app shows for uri at t.
func totpCode(uri string, t time.Time) (string, error) {
	key, err := otp.NewKeyFromURL(uri)
	if err != nil || key.Type() != "totp" || key.Secret() == "" {
		return "", errors.New("not an otpauth://totp/ URI with a secret")
	}
	period := key.Period()
	if period == 0 {
		period = 30
	}
	return hotp.GenerateCodeCustom(key.Secret(), uint64(t.Unix())/period, hotp.ValidateOpts{
		Digits:    key.Digits(),
		Algorithm: key.Algorithm(),
	})
}

// writeCBOR writes v in the deterministic encoding.
func writeCBOR(w io.Writer, v any) error {
	b, err := deterministicCBOR.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// markRequired marks flags a command cannot run without.
func markRequired(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic("cli: " + err.Error())
		}
	}
}
