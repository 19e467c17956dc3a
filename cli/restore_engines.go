package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sealbox/blobs"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/server"
)

// restoreToEngines restores the backup src into the engines loc names
// (admin.RestoreToEngines): a store in PostgreSQL and/or blobs in a bucket,
// whatever loc leaves in the data directory going there, the keys always.
func restoreToEngines(cmd *cobra.Command, src string, loc Location, opts admin.RestoreOptions) error {
	ctx := cmd.Context()
	if err := loc.refuseLocalStoreBeside(); err != nil {
		return err
	}
	var blobStore blobs.Engine
	var createBucket func() (blobs.Engine, error)
	if loc.Blobs != "" {
		// Reached without creating it: a missing bucket is created only
		// once the database, the keys and the backup have been checked.
		b, err := loc.openBlobs(ctx, blobsOpen{})
		switch {
		case errors.Is(err, errNoBucket):
			createBucket = func() (blobs.Engine, error) {
				b, err := loc.openBlobs(ctx, blobsOpen{createBucket: true})
				if bk, ok := b.(bucket); err == nil && ok && bk.CreatedBucket() {
					fmt.Fprintf(cmd.ErrOrStderr(), "restore: the bucket %s did not exist at %s; created it\n", bk.Bucket(), bk.Endpoint())
				}
				return b, err
			}
		case err != nil:
			return err
		default:
			blobStore = b
		}
	}
	if loc.Store == "" {
		if err := os.MkdirAll(loc.Data, 0o700); err != nil {
			return err
		}
	}
	store, err := loc.openStoreFor(ctx, forAdmin, kv.Options{Version: server.Version})
	if err != nil {
		return err
	}
	defer store.Close()
	if loc.Blobs == "" {
		if blobStore, err = loc.openBlobs(ctx, blobsOpen{}); err != nil {
			return err
		}
	}
	bar := newProgressBar("restore", cmd.ErrOrStderr())
	rep, err := admin.RestoreToEngines(ctx, src, admin.EngineTarget{
		DataDir: loc.Data, Store: store, Blobs: blobStore, CreateBlobs: createBucket,
		StoreAt: "the store " + loc.describeStore(), BlobsAt: "the blob store " + loc.describeBlobs(),
	}, opts, bar.update)
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "restored %s into the store %s and the blob store %s (keys in %s): %d blobs (%s) verified, in %s; start it with: %s\n",
		rep.From, loc.describeStore(), loc.describeBlobs(), loc.Data, rep.Blobs, humanBytes(rep.Bytes), rep.Elapsed.Round(time.Millisecond), serveCommand(loc))
	return nil
}

// serveCommand is the serve command line that starts what a restore made at
// loc, each argument quoted for a POSIX shell: pasted, an S3 URL's "&" must
// not end the command and start serve in the background without the rest.
func serveCommand(loc Location) string {
	args := []string{"sealbox", "serve", "--data", loc.Data}
	if loc.Store != "" {
		args = append(args, "--store", loc.describeStore())
	}
	if loc.Blobs != "" {
		args = append(args, "--blobs", loc.describeBlobs())
	}
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellQuote is s as one word of a POSIX shell: as it is when it holds only
// characters no shell treats specially, else in single quotes, each single
// quote inside closing them, escaped, and opening them again.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-:@%+,=", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
