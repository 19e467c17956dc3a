package cli

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"sealbox/cli/admin"
	"sealbox/server/translog"
)

// readLogKey reads the transparency log's signing key (two lines: the note
// signer key, then its verifier key), making it at first start with the
// origin given, or sealbox/<host name>, to be written with made. The origin
// is the key's name and the first line of every checkpoint, so it is fixed
// from then on: an origin given later that differs is refused rather than
// silently ignored.
func readLogKey(path, origin string, made *[]newFile) (translog.Key, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if origin == "" {
			origin = defaultLogOrigin()
		}
		skey, vkey, err := note.GenerateKey(rand.Reader, origin)
		if err != nil {
			return translog.Key{}, fmt.Errorf("--log-origin %q: %w", origin, err)
		}
		raw = []byte(skey + "\n" + vkey + "\n")
		*made = append(*made, newFile{path: path, data: raw, what: "the transparency log key"})
	} else if err != nil {
		return translog.Key{}, err
	}
	signer, verifierKey, err := admin.ParseLogKey(raw)
	if err != nil {
		return translog.Key{}, fmt.Errorf("%s: %w", path, err)
	}
	if origin != "" && origin != signer.Name() {
		return translog.Key{}, fmt.Errorf("the transparency log's origin is %q, fixed when its key was made; --log-origin %q differs", signer.Name(), origin)
	}
	return translog.Key{Signer: signer, VerifierKey: verifierKey}, nil
}

// defaultLogOrigin is sealbox/<host name>, or sealbox/localhost when the
// host name cannot name a note key (it may hold no space or plus).
func defaultLogOrigin() string {
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, " +\t\n") {
		host = "localhost"
	}
	return "sealbox/" + host
}
