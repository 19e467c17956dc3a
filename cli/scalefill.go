package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/durable"
	"sealbox/server"
	"sealbox/server/content"
	"sealbox/server/ids"
	"sealbox/server/password"
)

// fillFile is what `dev fill` leaves in the data directory for `dev
// measure`: the password of every account it made, a signed-in session per
// account (its access token in clear) and the ids and hashes a measurement
// addresses. It makes the directory a test instance: never fill or serve a
// real one with it.
const fillFile = "scale-fill.json"

// fillSpec is the shape of the library `dev fill` makes: Items assets,
// spread over Accounts accounts with Albums albums each. Every asset has a
// create op whose original (its ciphertext) the account holds, a manifest
// and a metadata blob; every ChainEvery-th asset then has ChainLen replace
// ops (a new manifest and metadata each), so some chains are long; every
// LargeEvery-th original is LargeSize bytes, the others 1 to 8 KiB.
type fillSpec struct {
	Items, Accounts, Albums int
	ChainEvery, ChainLen    int
	Sessions, Shares        int
	LargeEvery              int
	LargeSize               int64
	// InlineMax is the largest blob the store keeps inline, as the
	// server's --inline-max: the fill lays blobs out as a server would.
	InlineMax int64
	// Batch is how many assets one transaction writes.
	Batch int
	Seed  uint64
}

// fillReport is the fill file's content, and what `dev fill` prints.
type fillReport struct {
	Items    int           `json:"items"`
	Ops      int           `json:"ops"`
	Blobs    int           `json:"blobs"`
	Bytes    int64         `json:"bytes"`
	Sessions int           `json:"sessions"`
	Shares   int           `json:"shares"`
	Password string        `json:"password"`
	Accounts []fillAccount `json:"accounts"`
	Elapsed  string        `json:"elapsed"`
}

// fillAccount is one account of a filled store, as a measurement needs it.
type fillAccount struct {
	ID          string `json:"id"`
	Email       string `json:"email"`
	AccessToken string `json:"access_token"`
	// Albums are the account's album ids with their last sync_seq.
	Albums []fillAlbum `json:"albums"`
	// Original is a blob the account holds, for the ops a measurement sends.
	Original string `json:"original"`
	// Shares are a few of its share links, each with a blob it serves.
	Shares []fillShare `json:"shares,omitempty"`
}

type fillAlbum struct {
	ID      string `json:"id"`
	SyncSeq uint64 `json:"sync_seq"`
}

type fillShare struct {
	OpaqueID string `json:"opaque_id"`
	Hash     string `json:"hash"`
}

// filler writes one fill.
type filler struct {
	spec  fillSpec
	store *kv.Store
	// content places the blobs as the server does: inline in store, or
	// files of the blob engine.
	content  *content.Content
	protocol string
	now      time.Time
	rep      fillReport
	// next is the index of the next asset to make.
	next int
}

// fillStore fills a new store and blob store (openFillTarget checked and
// marked them) to spec, writing records only through kv's domain
// operations (kv.Bulk: the checks and writes the server's handlers run,
// many per transaction) and blobs only through their placement
// (server/content), before the records that name them, as the server does.
func fillStore(ctx context.Context, spec fillSpec, store *kv.Store, blobStore blobs.Engine) (*fillReport, error) {
	start := time.Now()
	f := &filler{spec: spec, store: store, content: content.New(store, blobStore, spec.InlineMax), protocol: server.DefaultConfig().ProtocolMax, now: store.Now()}
	if err := f.people(ctx); err != nil {
		return nil, err
	}
	for f.next < spec.Items {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := f.batch(min(spec.Batch, spec.Items-f.next)); err != nil {
			return nil, err
		}
	}
	f.rep.Items = spec.Items
	f.rep.Elapsed = time.Since(start).Round(time.Millisecond).String()
	return &f.rep, nil
}

// people makes the accounts (one password, hashed as the server hashes
// it), their albums and the sessions, in one transaction.
func (f *filler) people(ctx context.Context) error {
	f.rep.Password = randomHex(16)
	hash, err := password.NewHasher(password.Default, rand.Reader, 0).Hash(ctx, f.rep.Password)
	if err != nil {
		return err
	}
	accounts := make([]fillAccount, f.spec.Accounts)
	err = f.store.Bulk(func(b *kv.Bulk) error {
		for i := range accounts {
			a := &accounts[i]
			a.ID, a.Email = ids.UUID(rand.Reader), fmt.Sprintf("scale%d@example.org", i)
			if err := b.Account(&kv.Account{ID: a.ID, Email: a.Email, PasswordHash: hash, CreatedAt: f.now}); err != nil {
				return err
			}
			a.Albums = a.Albums[:0]
			for range f.spec.Albums {
				album, err := b.Album(a.ID, ids.UUID(rand.Reader), f.protocol)
				if err != nil {
					return err
				}
				a.Albums = append(a.Albums, fillAlbum{ID: album.ID})
			}
		}
		for i := range f.spec.Sessions {
			access, err := f.session(b, accounts[i%len(accounts)].ID, i)
			if err != nil {
				return err
			}
			if i < len(accounts) {
				accounts[i].AccessToken = access
			}
		}
		return nil
	})
	f.rep.Accounts, f.rep.Sessions = accounts, f.spec.Sessions
	return err
}

// session writes the i-th session, signed in at now and usable for a month,
// and returns its access token.
func (f *filler) session(b *kv.Bulk, accountID string, i int) (string, error) {
	access, refresh := randomHex(32), randomHex(32)
	id := ids.UUID(rand.Reader)
	return access, b.Session(&kv.Session{
		ID: id, AccountID: accountID, LineageID: id, ChainStartedAt: f.now,
		CreatedAt: f.now.Add(time.Duration(i)), AuthenticatedAt: f.now,
		AccessExpiresAt: f.now.Add(30 * 24 * time.Hour), RefreshExpiresAt: f.now.Add(30 * 24 * time.Hour),
		UserAgent: "sealbox-dev-fill", IPAddress: "127.0.0.1",
	}, access, refresh)
}

// fillAsset is one asset of a batch: its original and its ops' blobs.
type fillAsset struct {
	account, album int
	id             string
	original       []byte
	large          bool
	// manifests and metadata, one of each per op: the create, then the
	// replaces.
	manifests, metadata [][]byte
}

// batch makes the next n assets: the blobs that are files first, then their
// records, with the blobs kept inline, in one transaction.
func (f *filler) batch(n int) error {
	assets := make([]fillAsset, n)
	var small [][]byte
	var large [][]byte
	for k := range assets {
		a := f.asset(f.next + k)
		assets[k] = a
		switch {
		case f.content.Inline(a.original) != nil:
		case a.large:
			large = append(large, a.original)
		default:
			small = append(small, a.original)
		}
		for _, b := range slices.Concat(a.manifests, a.metadata) {
			if f.content.Inline(b) == nil {
				small = append(small, b)
			}
		}
	}
	if err := putBlobs(f.content, small, large); err != nil {
		return err
	}
	err := f.store.Bulk(func(b *kv.Bulk) error {
		for k := range assets {
			if err := f.record(b, f.next+k, &assets[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("assets %d to %d: %w", f.next, f.next+n-1, err)
	}
	f.next += n
	return nil
}

// asset generates asset i's bytes from the seed: the same spec gives the
// same library.
func (f *filler) asset(i int) fillAsset {
	rng := mrand.New(mrand.NewPCG(f.spec.Seed, uint64(i)))
	// Half of an account's assets are in its first album, a camera roll;
	// the other half are spread over the rest.
	a := fillAsset{account: i % f.spec.Accounts, id: ids.UUID(bytes.NewReader(randomBytes(rng, 16)))}
	if j := i / f.spec.Accounts; j%2 == 1 && f.spec.Albums > 1 {
		a.album = 1 + (j/2)%(f.spec.Albums-1)
	}
	size := 1024 + rng.IntN(7*1024)
	if f.spec.LargeEvery > 0 && i%f.spec.LargeEvery == f.spec.LargeEvery-1 {
		size, a.large = int(f.spec.LargeSize), true
	}
	a.original = randomBytes(rng, size)
	ops := 1
	if f.spec.ChainEvery > 0 && i%f.spec.ChainEvery == 0 {
		ops += f.spec.ChainLen
	}
	for range ops {
		// A signed manifest and a sealed metadata blob are a few hundred
		// bytes; their content is opaque to the server.
		a.manifests = append(a.manifests, randomBytes(rng, 300+rng.IntN(400)))
		a.metadata = append(a.metadata, randomBytes(rng, 200+rng.IntN(600)))
	}
	return a
}

// record writes asset i's records: the holding of its original (what an
// upload records), its ops, and every so often a share link of it.
func (f *filler) record(b *kv.Bulk, i int, a *fillAsset) error {
	acct := &f.rep.Accounts[a.account]
	album := &acct.Albums[a.album]
	original := kv.Blob{Hash: blobs.AddressOf(a.original), Size: int64(len(a.original)), StoredAt: f.now, Data: f.content.Inline(a.original)}
	if err := b.Hold(acct.ID, original); err != nil {
		return err
	}
	f.count(a.original)
	acct.Original = original.Hash
	prior := ""
	for k, manifest := range a.manifests {
		op := &kv.Op{
			AlbumID: album.ID, AssetID: a.id, Action: kv.OpCreate, ProtocolVersion: f.protocol,
			CreatedByUser: acct.ID, CiphertextHash: original.Hash,
			Manifest: kv.Blob{Hash: blobs.AddressOf(manifest), Size: int64(len(manifest)), Data: f.content.Inline(manifest)},
			Metadata: &kv.Blob{Hash: blobs.AddressOf(a.metadata[k]), Size: int64(len(a.metadata[k])), Data: f.content.Inline(a.metadata[k])},
		}
		op.MetadataBlobHash = op.Metadata.Hash
		if k > 0 {
			op.Action, op.PriorHash, op.OriginalBlobHash = kv.OpReplace, prior, original.Hash
		}
		res, err := b.Op(acct.ID, op)
		if err != nil {
			return err
		}
		album.SyncSeq = res.SyncSeq
		prior = op.Manifest.Hash
		f.count(manifest)
		f.count(a.metadata[k])
		f.rep.Ops++
	}
	if f.spec.Shares == 0 || i%max(1, f.spec.Items/f.spec.Shares) != 0 || f.rep.Shares >= f.spec.Shares {
		return nil
	}
	meta := blobs.AddressOf(a.metadata[len(a.metadata)-1])
	opaque := randomHex(16)
	if err := b.Share(opaque, &kv.Share{AccountID: acct.ID, MetadataHash: meta, Serves: []string{meta, original.Hash}}); err != nil {
		return err
	}
	f.rep.Shares++
	if len(acct.Shares) < 8 {
		acct.Shares = append(acct.Shares, fillShare{OpaqueID: opaque, Hash: meta})
	}
	return nil
}

func (f *filler) count(b []byte) {
	f.rep.Blobs++
	f.rep.Bytes += int64(len(b))
}

// fillBlobWriters is how many writers store a batch's small blobs side by
// side, so that they share the blob store's flushes.
const fillBlobWriters = 8

// putBlobs stores a batch's blob files, small ones in groups (PutFiles
// shares their flushes) and large ones streamed. It is the fill's one way
// into the blob store.
func putBlobs(place *content.Content, small, large [][]byte) error {
	var wg sync.WaitGroup
	errs := make(chan error, fillBlobWriters+len(large))
	per := (len(small) + fillBlobWriters - 1) / fillBlobWriters
	for start := 0; start < len(small); start += per {
		part := small[start:min(start+per, len(small))]
		wg.Go(func() {
			for len(part) > 0 {
				n := min(64, len(part))
				if err := place.PutFiles(part[:n]...); err != nil {
					errs <- err
					return
				}
				part = part[n:]
			}
		})
	}
	for _, b := range large {
		wg.Go(func() {
			if _, err := place.Put(bytes.NewReader(b), blobs.AddressOf(b), int64(len(b)), int64(len(b))); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func randomBytes(rng *mrand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("cli: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// devMarkerFile marks a data directory dev fill made. It holds the instance
// id fill gave the store and the blob store, written before the first
// record, so the dev commands tell a test instance they made from a real one
// and refuse any other before writing to it: a real instance must never get
// test accounts with month-long tokens, nor be migrated without fsync.
const devMarkerFile = "dev-instance"

// openFillTarget opens the store and blob store loc names for a fill, only
// when they are new: a data directory that does not exist or is empty, and
// a store and blob store that hold nothing and carry no instance id. It
// marks them as a dev instance (devMarkerFile, and the id in both) before
// returning. The bbolt file's commits skip fsync (it is synced once at the
// end; a crash mid-fill leaves a directory to delete, nothing else).
func openFillTarget(ctx context.Context, loc Location) (*kv.Store, blobs.Engine, error) {
	entries, err := os.ReadDir(loc.Data)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	if len(entries) > 0 {
		return nil, nil, fmt.Errorf("%s is not empty: dev fill, a measuring tool, writes only a new, empty data directory it creates, never one that may be a real instance's; give --data a new directory", loc.Data)
	}
	if err := os.MkdirAll(loc.Data, 0o700); err != nil {
		return nil, nil, err
	}
	// NoMigrate: a PostgreSQL store of an older format is refused as it
	// is, not migrated and then refused.
	store, err := loc.openStoreFor(ctx, forFill, kv.Options{Version: server.Version, NoMigrate: true})
	if err != nil {
		return nil, nil, err
	}
	blobStore, err := loc.openBlobs(ctx, blobsOpen{})
	if err == nil {
		err = refuseUsed(loc, store, blobStore)
	}
	if err == nil {
		id := ids.UUID(rand.Reader)
		if err = writeNewFile(filepath.Join(loc.Data, devMarkerFile), []byte(id+"\n")); err == nil {
			_, err = markInstance(store, blobStore, id)
		}
	}
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return store, blobStore, nil
}

// refuseUsed refuses a store or blob store that is not new: one that holds
// a record or a blob, or carries an instance id.
func refuseUsed(loc Location, store *kv.Store, blobStore blobs.Engine) error {
	in, err := store.Instance()
	if err != nil {
		return err
	}
	served, err := store.Served()
	if err != nil {
		return err
	}
	if served || in.ID != "" || in.Restoring != "" {
		return fmt.Errorf("the store %s is not empty (it holds records or an instance id): dev fill, a measuring tool, fills only a new store, never one that may be a real instance's", loc.describeStore())
	}
	marker, err := blobStore.Instance()
	if err != nil {
		return err
	}
	held, err := blobs.HoldsBlobs(blobStore)
	if err != nil {
		return err
	}
	if held || marker != "" {
		return fmt.Errorf("the blob store %s is not empty (it holds blobs or an instance marker): dev fill, a measuring tool, fills only a new blob store, never one that may be a real instance's", loc.describeBlobs())
	}
	return nil
}

// refuseNonDev refuses an instance dev fill did not make: one without the
// marker, or whose store or blob store is another instance than the marker
// names. It opens both read-only, so a refused instance is left untouched.
func refuseNonDev(ctx context.Context, loc Location) error {
	raw, err := os.ReadFile(filepath.Join(loc.Data, devMarkerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s was not made by sealbox dev fill (it has no %s marker): dev measure, a measuring tool, writes ops and sign-ins into what it measures, so it measures only a test instance dev fill made", loc.Data, devMarkerFile)
	}
	if err != nil {
		return err
	}
	id := strings.TrimSpace(string(raw))
	store, err := loc.openStoreFor(ctx, forLooking, kv.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	in, err := store.Instance()
	store.Close()
	if err != nil {
		return err
	}
	blobStore, err := loc.openBlobs(ctx, blobsOpen{readOnly: true})
	if err != nil {
		return err
	}
	marker, err := blobStore.Instance()
	if err != nil {
		return err
	}
	if in.ID != id || marker != id {
		return fmt.Errorf("%s says dev fill made instance %s, but the store %s is instance %q and the blob store %s instance %q: dev measure measures only the instance dev fill made there",
			loc.Data, id, loc.describeStore(), in.ID, loc.describeBlobs(), marker)
	}
	return nil
}

// syncFile makes a file written without fsync durable.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return durable.Close(f, nil)
}

// writeFillReport writes the fill file, readable by its owner only (it
// holds access tokens and the accounts' password).
func writeFillReport(dataDir string, rep *fillReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dataDir, fillFile), append(b, '\n'), 0o600)
}
