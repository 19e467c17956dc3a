package library

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
	"sealbox/kv/durable"
)

// Asset is one of the account's assets as a device reads it back: its
// album, its last op and that op's manifest, its key and its opened
// metadata.
type Asset struct {
	AlbumID    string
	AlbumTitle string
	Entry      client.FeedEntry
	Manifest   *sealed.Manifest
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

// open reads the asset's manifest (e's ManifestHash) and the metadata it
// names, and opens them. A refusal of the server (not held, an outage that
// outlasted the retries) is an error of the run; bytes that do not open
// are an *AssetError.
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
	metaBytes, err := c.readSmall(ctx, m.MetadataBlobHash)
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
	return Asset{AlbumID: albumID, AlbumTitle: title, Entry: e, Manifest: m, Key: key, Meta: md}, nil
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
// file is written under a temporary name, synced, then given its name. A
// file already in the folder is never replaced or removed: it may be the
// person's own (an edited copy, another camera's photo of the same name).
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
	// another album) are linked to it once it is there, or written
	// themselves when it could not be.
	taken := map[string]bool{}
	first := map[string]*exportJob{} // content hmac -> the job that downloads it
	var downloads, links []*exportJob
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
			j := &exportJob{asset: a, files: x.files(a, taken)}
			content := a.Meta.ContentHMAC
			if c := a.Meta.Companion; c != nil {
				content += "+" + c.ContentHMAC
			}
			if f, ok := first[content]; ok {
				j.linkTo = f
				links = append(links, j)
				continue
			}
			first[content] = j
			downloads = append(downloads, j)
		}
	}
	var mu sync.Mutex
	work := make(chan *exportJob)
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

// exportJob is one asset to export: its files; with linkTo, the job of the
// same asset (the same originals in another album) run earlier in this
// run, whose files it links to when that job put them in place.
type exportJob struct {
	asset  Asset
	files  []exportFile
	linkTo *exportJob
	// ok says that every file is in place under its name (path): set by
	// exportFiles, read by the jobs linking to this one after it ran.
	ok bool
}

// exportFile is one file of an asset: an original (role original or
// companion) read from its blob, or a sidecar from the metadata.
type exportFile struct {
	name string // its name in the metadata
	dir  string // its folder
	// id is its asset's id, whose first characters tell its name apart
	// from another file's of the same name; n says which of its names it
	// has (path).
	id   string
	n    int
	role sealed.Role // "" for a sidecar
	size int64
	data []byte // a sidecar's bytes
}

// path is where the file goes: its name in the metadata; from n 1 on, with
// the asset id's first characters before its extension, and from n 2 on,
// n after them.
func (f *exportFile) path() string {
	name := safeName(f.name)
	if f.n == 0 {
		return filepath.Join(f.dir, name)
	}
	tag := f.id[:8]
	if f.n > 1 {
		tag += " " + strconv.Itoa(f.n)
	}
	ext := filepath.Ext(name)
	return filepath.Join(f.dir, strings.TrimSuffix(name, ext)+" ("+tag+")"+ext)
}

// exportAsset puts one asset's files in place: written, or its originals
// linked to the same originals exported elsewhere in this run.
func (x *Exporter) exportAsset(ctx context.Context, j *exportJob) Event {
	what, err := x.exportFiles(ctx, j)
	ev := Event{Path: j.files[0].path(), What: what, Album: j.asset.AlbumTitle}
	if err != nil {
		ev.Error = err.Error()
	}
	for _, f := range j.files {
		ev.Bytes += f.size
	}
	if len(j.files) > 1 && j.files[1].role == sealed.RoleCompanion {
		ev.Companion = j.files[1].path()
	}
	return ev
}

// exportFiles puts the job's files in place and says what it did:
// "unchanged" when each was there already, "linked" when the original was
// linked, else "exported"; or "failed".
func (x *Exporter) exportFiles(ctx context.Context, j *exportJob) (string, error) {
	a := j.asset
	when := captureTime(a.Meta.Taken)
	// Only a copy this run put in place is linked to: where one that
	// failed was to go there is nothing, or by then another's file.
	var linkTo []exportFile
	if j.linkTo != nil && j.linkTo.ok {
		linkTo = j.linkTo.files
	}
	what := "unchanged"
	for i := range j.files {
		f := &j.files[i]
		did, err := x.exportFile(ctx, a, f, linkTo, when)
		if err != nil {
			return "failed", fmt.Errorf("%s in album %s: %w", f.name, a.AlbumTitle, err)
		}
		if did != "" && (i == 0 || what == "unchanged") {
			what = did
		}
	}
	j.ok = true
	return what, nil
}

// exportFile puts one file of the asset at the first of its names, from
// the one it has, that already holds it or that nothing has taken, and
// says what it did: "" when a name held it, "linked" to the same original
// among linkTo where the file system has links, or "exported" (the
// original's bytes, or the sidecar's). A name taken by another file
// (the person's own edit, another camera's photo of the same name) is
// passed over: export never replaces nor removes a file it did not write.
func (x *Exporter) exportFile(ctx context.Context, a Asset, f *exportFile, linkTo []exportFile, when time.Time) (string, error) {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return "", err
	}
	held := func(p string) bool { return holds(p, f.size, when) }
	for _, l := range linkTo {
		if f.role != "" && l.role == f.role {
			src := l.path()
			// A name that is src's file already (an earlier export's link)
			// holds it even when this asset's capture time, the time held
			// looks for, is not src's: it is not linked again elsewhere.
			linked, err := place(f, func(p string) bool { return held(p) || sameFile(p, src) }, func(p string) error { return os.Link(src, p) })
			switch {
			case err != nil:
				// No links on this file system: the file is written instead.
			case linked:
				return "linked", nil
			default:
				return "", nil
			}
		}
	}
	if found, err := seek(f, held); err != nil || found {
		return "", err
	}
	var wrote bool
	var err error
	if f.role == "" {
		wrote, err = writeFile(f, held, when, func(w io.Writer) error {
			_, err := w.Write(f.data)
			return err
		})
	} else {
		wrote, err = x.download(ctx, a, f, held, when)
	}
	if err != nil || !wrote {
		return "", err
	}
	return "exported", nil
}

// download writes the asset's original (or companion) f through a
// temporary file (writeFile).
func (x *Exporter) download(ctx context.Context, a Asset, f *exportFile, held func(string) bool, when time.Time) (bool, error) {
	ref := a.Meta.Blobs[f.role]
	body, err := x.Catalog.Client.ReadBlob(ctx, ref.Hash, 0, -1)
	if err != nil {
		return false, err
	}
	defer body.Close()
	plain, err := sealed.NewReader(a.Key.BlobKey(f.role), body)
	if err != nil {
		return false, err
	}
	return writeFile(f, held, when, func(w io.Writer) error {
		n, err := io.Copy(w, plain)
		if err == nil && n != ref.Size {
			err = fmt.Errorf("the %s is %d bytes, its metadata says %d", f.role, n, ref.Size)
		}
		return err
	})
}

// writeFile writes f through a temporary file of its folder, synced, with
// its time set, then gives it f's first free name (place, with linkNew):
// nothing is left under a name half-written, nothing under the temporary
// name after a failure, and nothing that had the name is replaced. It
// reports false when a name held the file by then.
func writeFile(f *exportFile, held func(string) bool, when time.Time, write func(io.Writer) error) (bool, error) {
	tmp, err := os.CreateTemp(f.dir, ".sealbox-export-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) // the file stays under the name it was given
	err = durable.Close(tmp, write(tmp))
	if err == nil {
		err = os.Chtimes(tmp.Name(), when, when)
	}
	if err != nil {
		return false, err
	}
	return place(f, held, func(p string) error { return linkNew(tmp.Name(), p) })
}

// linkNew gives the file tmp the name p as well, failing with fs.ErrExist
// when p is taken, as a hard link does. A rename would replace what has
// the name. On a file system without hard links (FAT, exFAT) p is claimed
// by creating it exclusively, and tmp renamed over that empty claim, which
// is export's own.
func linkNew(tmp, p string) error {
	err := os.Link(tmp, p)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	claim, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	claim.Close()
	return os.Rename(tmp, p)
}

// seek moves f to the first of its names, from the one it has, that holds
// it (held) or that nothing has taken, and reports whether that name holds
// it.
func seek(f *exportFile, held func(string) bool) (bool, error) {
	for ; ; f.n++ {
		p := f.path()
		if held(p) {
			return true, nil
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
}

// place gives f the first of its free names with put, which must fail with
// fs.ErrExist instead of replacing what has the name: a name taken since
// seek looked is passed over as well. It reports false when a name held
// the file already, and put was not needed.
func place(f *exportFile, held func(string) bool, put func(string) error) (bool, error) {
	for ; ; f.n++ {
		if found, err := seek(f, held); err != nil || found {
			return false, err
		}
		if err := put(f.path()); !errors.Is(err, fs.ErrExist) {
			return err == nil, err
		}
	}
}

// holds reports whether the file at path is the export of a file of size
// bytes captured at when: its size, and its time the capture time.
func holds(path string, size int64, when time.Time) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() == size && fi.ModTime().Equal(when)
}

// sameFile reports whether a and b name one file.
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// files are the asset's files and where they go: its original first, then
// its companion, then its sidecars, side by side. A file whose name is
// taken in its folder by another asset's gets the asset id's first
// characters before its extension (path). Names are compared without
// case: on a case-insensitive file system (macOS's, Windows's)
// IMG_0001.JPG and img_0001.jpg are one file.
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
	for i := range files {
		f := &files[i]
		f.dir, f.id = dir, a.Entry.AssetID
		for taken[strings.ToLower(f.path())] {
			f.n++
		}
		taken[strings.ToLower(f.path())] = true
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
