package library

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
)

// Asset is one of the account's assets as a device reads it back: its
// album, its last op, its key and its opened metadata.
type Asset struct {
	AlbumID    string
	AlbumTitle string
	Entry      client.FeedEntry
	Key        sealed.AssetKey
	Meta       *sealed.Metadata
}

// Catalog reads the account's albums and assets from the server and opens
// them with the account's keys, checking that each manifest was signed by
// the account's identity key.
type Catalog struct {
	Client *client.Client
	Keys   *Keys

	albumKeys map[string]sealed.AlbumKey
}

// AssetError is an asset the catalog could not open: damaged on the server,
// or not signed by the account.
type AssetError struct {
	AlbumID, AssetID, Name string
	Err                    error
}

func (e *AssetError) Error() string {
	name := e.Name
	if name == "" {
		name = "asset " + e.AssetID
	}
	return fmt.Sprintf("%s (album %s): %v", name, e.AlbumID, e.Err)
}

// Albums are the account's album ids, oldest first.
func (c *Catalog) Albums(ctx context.Context) ([]string, error) {
	albums, err := c.Client.Albums(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(albums))
	for i, a := range albums {
		ids[i] = a.AlbumID
	}
	return ids, nil
}

// Assets reads and opens every asset of the album. An asset that does not
// open is returned among the errors; the others are read all the same.
func (c *Catalog) Assets(ctx context.Context, albumID string) ([]Asset, []*AssetError, error) {
	entries, _, err := c.Client.AllAssets(ctx, albumID)
	if err != nil {
		return nil, nil, err
	}
	var assets []Asset
	var failed []*AssetError
	for _, e := range entries {
		if e.Action == "delete" {
			// In the trash: its chain ends in a tombstone (server/PROTOCOL.md
			// §9); restored, it shows its last op again.
			continue
		}
		a, err := c.open(ctx, albumID, e)
		if err != nil {
			var ae *AssetError
			if !errors.As(err, &ae) {
				return nil, nil, err
			}
			failed = append(failed, ae)
			continue
		}
		assets = append(assets, a)
	}
	return assets, failed, nil
}

// open reads the asset's manifest and metadata and opens them. A refusal
// of the server (not held, an outage that outlasted the retries) is an
// error of the run; bytes that do not open are an *AssetError.
func (c *Catalog) open(ctx context.Context, albumID string, e client.FeedEntry) (Asset, error) {
	bad := func(err error) error { return &AssetError{AlbumID: albumID, AssetID: e.AssetID, Err: err} }
	manifestBytes, err := c.readSmall(ctx, e.ManifestHash)
	if err != nil {
		return Asset{}, err
	}
	m, err := sealed.ParseManifest(manifestBytes)
	if err != nil {
		return Asset{}, bad(fmt.Errorf("its manifest: %w", err))
	}
	if !bytes.Equal(m.Signer, c.Keys.Identity.Identity().PublicKey()) {
		return Asset{}, bad(errors.New("its manifest is not signed by this account's identity key"))
	}
	ak, err := c.albumKey(albumID, m)
	if err != nil {
		return Asset{}, bad(err)
	}
	var key sealed.AssetKey
	if m.KeyMode == "wrapped" {
		key, err = ak.UnwrapAssetKey(albumID, m.FileID, m.AssetKey)
	} else {
		key, err = ak.DeriveAssetKey(m.FileID)
	}
	if err != nil {
		return Asset{}, bad(err)
	}
	metaBytes, err := c.readSmall(ctx, e.MetadataBlobHash)
	if err != nil {
		return Asset{}, err
	}
	md, err := sealed.OpenMetadata(key, metaBytes)
	if err != nil {
		return Asset{}, bad(fmt.Errorf("its metadata: %w", err))
	}
	title := albumID
	if raw, ok := md.Extra[AlbumTitleKey]; ok {
		var t string
		if json.Unmarshal(raw, &t) == nil && t != "" {
			title = t
		}
	}
	return Asset{AlbumID: albumID, AlbumTitle: title, Entry: e, Key: key, Meta: md}, nil
}

func (c *Catalog) albumKey(albumID string, m *sealed.Manifest) (sealed.AlbumKey, error) {
	if c.albumKeys == nil {
		c.albumKeys = map[string]sealed.AlbumKey{}
	}
	if k, ok := c.albumKeys[albumID]; ok {
		return k, nil
	}
	k, err := c.Keys.Master.UnwrapAlbumKey(albumID, m.AMKVersion, m.AlbumKey)
	if err != nil {
		return k, fmt.Errorf("its album key: %w", err)
	}
	c.albumKeys[albumID] = k
	return k, nil
}

// maxSmallBlob bounds a manifest or metadata blob read into memory.
const maxSmallBlob = 8 << 20

func (c *Catalog) readSmall(ctx context.Context, hash string) ([]byte, error) {
	r, err := c.Client.ReadBlob(ctx, hash, 0, -1)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxSmallBlob+1))
	if err == nil && len(b) > maxSmallBlob {
		err = fmt.Errorf("blob %s is larger than a manifest or metadata blob can be", hash)
	}
	return b, err
}

// Exporter writes the account's originals into a folder, byte for byte as
// they were synced, each with its capture time as its file time.
// Incremental: a file already there with the original's size and time is
// not written again. Nothing is left under a final name half-written: a
// file is written under a temporary name, synced, then renamed.
type Exporter struct {
	Catalog *Catalog
	Dest    string
	// Album, when set, exports only the album of that title.
	Album string
	// Layout "album": DEST/ALBUM/NAME; "date": DEST/YYYY/MM/NAME.
	Layout string
	// Jobs is how many originals are downloaded at once.
	Jobs   int
	Report func(Event)
}

// Export exports and counts what it did; a file that could not be
// exported (damaged on the server) is reported, and the rest goes on.
func (x *Exporter) Export(ctx context.Context) (Summary, error) {
	var sum Summary
	report := func(ev Event) {
		sum.count(ev)
		if x.Report != nil {
			x.Report(ev)
		}
	}
	albums, err := x.Catalog.Albums(ctx)
	if err != nil {
		return sum, err
	}
	// Every asset's place is decided first, in a fixed order, so names
	// do not depend on which download ends first. The first asset of each
	// content is downloaded, Jobs at a time; the others (the same photo in
	// another album) are linked to it once it is there.
	taken := map[string]bool{}
	first := map[string]exportJob{} // content hmac -> the job that downloads it
	var downloads, links []exportJob
	for _, albumID := range albums {
		assets, failed, err := x.Catalog.Assets(ctx, albumID)
		if err != nil {
			return sum, err
		}
		for _, f := range failed {
			report(Event{Path: f.Name, Album: f.AlbumID, What: "failed", Error: f.Error()})
		}
		sort.Slice(assets, func(i, j int) bool { return assets[i].Entry.AssetID < assets[j].Entry.AssetID })
		for _, a := range assets {
			if x.Album != "" && a.AlbumTitle != x.Album {
				continue
			}
			j := exportJob{asset: a, final: x.path(a, taken)}
			if f, ok := first[a.Meta.ContentHMAC]; ok {
				j.linkTo = f.final
				links = append(links, j)
				continue
			}
			first[a.Meta.ContentHMAC] = j
			downloads = append(downloads, j)
		}
	}
	var mu sync.Mutex
	work := make(chan exportJob)
	var wg sync.WaitGroup
	for range max(1, x.Jobs) {
		wg.Go(func() {
			for j := range work {
				ev := x.exportAsset(ctx, j)
				mu.Lock()
				report(ev)
				mu.Unlock()
			}
		})
	}
	for _, j := range downloads {
		if ctx.Err() != nil {
			break
		}
		work <- j
	}
	close(work)
	wg.Wait()
	for _, j := range links {
		if ctx.Err() != nil {
			break
		}
		report(x.exportAsset(ctx, j))
	}
	sort.Strings(sum.FailedPaths)
	return sum, ctx.Err()
}

// exportJob is one asset to export to final; with linkTo, the same
// original exported at that path, to link to.
type exportJob struct {
	asset  Asset
	final  string
	linkTo string
}

// exportAsset writes one asset's original, or links it to the same
// original exported elsewhere in this run.
func (x *Exporter) exportAsset(ctx context.Context, j exportJob) Event {
	a, final := j.asset, j.final
	ev := Event{Path: final, Album: a.AlbumTitle, Bytes: a.Meta.Size}
	fail := func(err error) Event {
		ev.What, ev.Error = "failed", fmt.Sprintf("%s in album %s: %v", a.Meta.Name, a.AlbumTitle, err)
		return ev
	}
	when := captureTime(a.Meta.Taken)
	if fi, err := os.Stat(final); err == nil && fi.Size() == a.Meta.Size && fi.ModTime().Equal(when) {
		ev.What = "unchanged"
		return ev
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fail(err)
	}
	if j.linkTo != "" {
		// A hard link where the file system has them, a copy otherwise.
		os.Remove(final)
		if os.Link(j.linkTo, final) == nil {
			ev.What = "linked"
			return ev
		}
	}
	if err := x.download(ctx, a, final, when); err != nil {
		return fail(err)
	}
	ev.What = "exported"
	return ev
}

// download writes the asset's original to final through a temporary file.
func (x *Exporter) download(ctx context.Context, a Asset, final string, when time.Time) error {
	ref := a.Meta.Blobs[sealed.RoleOriginal]
	body, err := x.Catalog.Client.ReadBlob(ctx, ref.Hash, 0, -1)
	if err != nil {
		return err
	}
	defer body.Close()
	plain, err := sealed.NewReader(a.Key.BlobKey(sealed.RoleOriginal), body)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), ".sealbox-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	n, err := io.Copy(tmp, plain)
	if err == nil && n != ref.Size {
		err = fmt.Errorf("the original is %d bytes, its metadata says %d", n, ref.Size)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(tmp.Name(), when, when)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), final)
}

// path is where the asset's original goes; a second asset of the same name
// in the same folder gets its id's first characters before its extension.
func (x *Exporter) path(a Asset, taken map[string]bool) string {
	dir := filepath.Join(x.Dest, safeName(a.AlbumTitle))
	if x.Layout == "date" {
		t := captureTime(a.Meta.Taken)
		dir = filepath.Join(x.Dest, t.Format("2006"), t.Format("01"))
	}
	name := safeName(a.Meta.Name)
	p := filepath.Join(dir, name)
	if taken[p] {
		ext := filepath.Ext(name)
		p = filepath.Join(dir, strings.TrimSuffix(name, ext)+" ("+a.Entry.AssetID[:8]+")"+ext)
	}
	taken[p] = true
	return p
}

// safeName is a name that stays one path element: no separator, not "."
// or "..", not empty.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, s)
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	return s
}

// captureTime is the instant a file's time is set to: the recorded wall
// clock in its offset, or in this machine's zone when none was recorded.
func captureTime(t *sealed.Taken) time.Time {
	if t == nil {
		return time.Unix(0, 0)
	}
	loc := time.Local
	if t.OffsetMinutes != nil {
		loc = time.FixedZone("", *t.OffsetMinutes*60)
	}
	when, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", t.Local, loc)
	if err != nil {
		return time.Unix(0, 0)
	}
	return when
}
