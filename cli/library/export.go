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
	"sealbox/kv/durable"
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
			j := exportJob{asset: a, files: x.files(a, taken)}
			content := a.Meta.ContentHMAC
			if c := a.Meta.Companion; c != nil {
				content += "+" + c.ContentHMAC
			}
			if f, ok := first[content]; ok {
				j.linkTo = f.files
				links = append(links, j)
				continue
			}
			first[content] = j
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

// exportJob is one asset to export: its files; with linkTo, the files of
// the same asset (the same originals in another album) exported earlier in
// this run, to link to.
type exportJob struct {
	asset  Asset
	files  []exportFile
	linkTo []exportFile
}

// exportFile is one file of an asset: an original (role original or
// companion) read from its blob, or a sidecar from the metadata.
type exportFile struct {
	name string // its name in the metadata
	path string
	role sealed.Role // "" for a sidecar
	size int64
	data []byte // a sidecar's bytes
}

// exportAsset writes one asset's files, or links its originals to the
// same originals exported elsewhere in this run.
func (x *Exporter) exportAsset(ctx context.Context, j exportJob) Event {
	a := j.asset
	ev := Event{Path: j.files[0].path, Album: a.AlbumTitle}
	for _, f := range j.files {
		ev.Bytes += f.size
	}
	if len(j.files) > 1 && j.files[1].role == sealed.RoleCompanion {
		ev.Companion = j.files[1].path
	}
	when := captureTime(a.Meta.Taken)
	unchanged := true
	for _, f := range j.files {
		if fi, err := os.Stat(f.path); err != nil || fi.Size() != f.size || !fi.ModTime().Equal(when) {
			unchanged = false
		}
	}
	if unchanged {
		ev.What = "unchanged"
		return ev
	}
	ev.What = "exported"
	for i, f := range j.files {
		if err := x.exportFile(ctx, a, f, j.linkTo, when, i == 0 && j.linkTo != nil, &ev); err != nil {
			ev.What, ev.Error = "failed", fmt.Sprintf("%s in album %s: %v", f.name, a.AlbumTitle, err)
			return ev
		}
	}
	return ev
}

// exportFile writes one file of the asset: a link to the same original
// among linkTo where the file system has links, else the original's
// bytes, or the sidecar's.
func (x *Exporter) exportFile(ctx context.Context, a Asset, f exportFile, linkTo []exportFile, when time.Time, first bool, ev *Event) error {
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		return err
	}
	for _, l := range linkTo {
		if f.role != "" && l.role == f.role {
			os.Remove(f.path)
			if os.Link(l.path, f.path) == nil {
				if first {
					ev.What = "linked"
				}
				return nil
			}
		}
	}
	if f.role == "" {
		return writeFile(f.path, when, func(w io.Writer) error {
			_, err := w.Write(f.data)
			return err
		})
	}
	return x.download(ctx, a, f, when)
}

// download writes the asset's original (or companion) f through a
// temporary file.
func (x *Exporter) download(ctx context.Context, a Asset, f exportFile, when time.Time) error {
	ref := a.Meta.Blobs[f.role]
	body, err := x.Catalog.Client.ReadBlob(ctx, ref.Hash, 0, -1)
	if err != nil {
		return err
	}
	defer body.Close()
	plain, err := sealed.NewReader(a.Key.BlobKey(f.role), body)
	if err != nil {
		return err
	}
	return writeFile(f.path, when, func(w io.Writer) error {
		n, err := io.Copy(w, plain)
		if err == nil && n != ref.Size {
			err = fmt.Errorf("the %s is %d bytes, its metadata says %d", f.role, n, ref.Size)
		}
		return err
	})
}

// writeFile writes final through a temporary file of its folder, synced,
// with its time set, then renamed: nothing is left under final
// half-written, and nothing under the temporary name after a failure.
func writeFile(final string, when time.Time, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(final), ".sealbox-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = durable.Close(tmp, write(tmp))
	if err == nil {
		err = os.Chtimes(tmp.Name(), when, when)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), final)
}

// files are the asset's files and where they go: its original first, then
// its companion, then its sidecars, side by side. A file whose name is
// taken in its folder by another asset's gets the asset id's first
// characters before its extension.
func (x *Exporter) files(a Asset, taken map[string]bool) []exportFile {
	dir := filepath.Join(x.Dest, safeName(a.AlbumTitle))
	if x.Layout == "date" {
		t := captureTime(a.Meta.Taken)
		dir = filepath.Join(x.Dest, t.Format("2006"), t.Format("01"))
	}
	files := []exportFile{{name: a.Meta.Name, role: sealed.RoleOriginal, size: a.Meta.Size}}
	if c := a.Meta.Companion; c != nil {
		files = append(files, exportFile{name: c.Name, role: sealed.RoleCompanion, size: c.Size})
	}
	for _, sc := range a.Meta.Sidecars {
		files = append(files, exportFile{name: sc.Name, size: int64(len(sc.Data)), data: sc.Data})
	}
	for i, f := range files {
		name := safeName(f.name)
		p := filepath.Join(dir, name)
		if taken[p] {
			ext := filepath.Ext(name)
			p = filepath.Join(dir, strings.TrimSuffix(name, ext)+" ("+a.Entry.AssetID[:8]+")"+ext)
		}
		taken[p] = true
		files[i].path = p
	}
	return files
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
