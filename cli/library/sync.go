package library

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"sealbox/cli/client"
	"sealbox/cli/media"
	"sealbox/cli/sealed"
	"sealbox/kv/fault"
	"sealbox/server/ids"
)

// Syncer copies photo folders to the server, sealed: backup semantics (a
// file deleted here stays on the server), idempotent (a second run on an
// unchanged folder reads no file), and resumable (a large original's
// sealed bytes and tus location are kept until the server has them).
type Syncer struct {
	Client  *client.Client
	Profile *Profile
	Index   *Index
	Session *Session
	Keys    *Keys
	// Album files every photo under this title; with AlbumPerFolder, each
	// folder's photos go to an album named after the folder; with neither,
	// to an album named after the folder given.
	Album          string
	AlbumPerFolder bool
	Jobs           int
	DryRun         bool
	// TusOver is the sealed size from which an original goes through a
	// resumable tus transfer instead of one PUT.
	TusOver int64
	// Report receives one Event per file.
	Report func(Event)
	// Plan, when set, is told how many files and bytes the run looks at,
	// before the first Event.
	Plan func(files int, bytes int64)
	// ClientVersion is written into every manifest.
	ClientVersion string
	// Now is the clock of the manifests' timestamps.
	Now func() time.Time
	// Settle is how long a file that changed while it was read must stay
	// unchanged before it is read again (a photo still being copied in).
	Settle time.Duration

	albums   sync.Mutex
	uploads  map[string]string // album id -> this run's upload session
	renderMu chan struct{}     // bounds the images decoded at once (memory)
}

// Event is what happened to one file.
type Event struct {
	Path string `json:"path"`
	// What: "uploaded", "unchanged", "known" (the same content is already
	// in the album: a moved or renamed file), "would-upload" (dry run),
	// "skipped" (not a photo or video) or "failed".
	What  string `json:"event"`
	Album string `json:"album,omitempty"`
	// Bytes are the bytes sent (or exported); Size is the file's size,
	// whatever was done with it.
	Bytes int64 `json:"bytes,omitempty"`
	Size  int64 `json:"size,omitempty"`
	// NoThumbnail is a photo or video the client cannot make a thumbnail
	// of (HEIC, RAW, video): its original is kept all the same.
	NoThumbnail bool   `json:"no_thumbnail,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Summary counts a run's events. Done counts the files uploaded (or that a
// dry run would upload) by a sync, and exported or linked by an export.
type Summary struct {
	Done, Unchanged, Known, Failed int
	Bytes                          int64
	FailedPaths                    []string
}

// count adds one event.
func (sum *Summary) count(ev Event) {
	switch ev.What {
	case "uploaded", "would-upload", "exported", "linked":
		sum.Done++
		sum.Bytes += ev.Bytes
	case "unchanged":
		sum.Unchanged++
	case "known":
		sum.Known++
	case "failed":
		sum.Failed++
		sum.FailedPaths = append(sum.FailedPaths, ev.Path)
	}
}

// job is one file to sync, with the album it goes to and its asset's
// sidecars.
type job struct {
	path     string
	album    string
	sidecars []string
}

// Sync syncs the folders roots (every photo and video below them).
func (s *Syncer) Sync(ctx context.Context, roots []string) (Summary, error) {
	s.uploads = map[string]string{}
	s.renderMu = make(chan struct{}, 2)
	var jobs []job
	for _, root := range roots {
		found, err := s.walk(root)
		if err != nil {
			return Summary{}, err
		}
		jobs = append(jobs, found...)
	}
	if s.Plan != nil {
		var total int64
		for _, j := range jobs {
			if fi, err := os.Stat(j.path); err == nil {
				total += fi.Size()
			}
		}
		s.Plan(len(jobs), total)
	}
	var sum Summary
	var mu sync.Mutex
	var stopped error
	run, stop := context.WithCancel(ctx)
	defer stop()
	work := make(chan job)
	var wg sync.WaitGroup
	for range max(1, s.Jobs) {
		wg.Go(func() {
			for j := range work {
				ev, err := s.syncFile(run, j)
				mu.Lock()
				if stopsRun(err) {
					// Every file after this one would fail the same way:
					// the run ends, saying why once.
					if stopped == nil {
						stopped = err
					}
					stop()
				} else if run.Err() == nil {
					sum.count(ev)
					if s.Report != nil {
						s.Report(ev)
					}
				}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		if run.Err() != nil {
			break
		}
		work <- j
	}
	close(work)
	wg.Wait()
	s.closeUploads(ctx)
	sort.Strings(sum.FailedPaths)
	if stopped != nil {
		return sum, stopped
	}
	return sum, ctx.Err()
}

// stopsRun reports whether err ends the whole run rather than one file's
// sync: the account's quota is full, the session ended, or the server did
// not answer through every retry.
func stopsRun(err error) bool {
	var ne *client.NetError
	return client.CodeOf(err) == fault.ECodeQuotaExceeded || errors.Is(err, client.ErrSignedOut) ||
		client.CodeOf(err) == fault.ECodeUnauthenticated || errors.As(err, &ne)
}

// walk lists the media files below root with their albums, grouping each
// folder's files so that sidecars travel with their photo.
func (s *Syncer) walk(root string) ([]job, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a folder", root)
	}
	var jobs []job
	err = filepath.WalkDir(root, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			// An unreadable folder is reported and skipped; the rest goes on.
			if d != nil && d.IsDir() && dir != root {
				jobs = append(jobs, job{path: dir})
				return fs.SkipDir
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			jobs = append(jobs, job{path: dir})
			return fs.SkipDir
		}
		var names []string
		for _, e := range entries {
			if e.Type().IsRegular() {
				names = append(names, e.Name())
			}
		}
		album := s.Album
		switch {
		case album != "":
		case s.AlbumPerFolder:
			album = filepath.Base(dir)
		default:
			album = filepath.Base(root)
		}
		for _, g := range media.GroupFiles(names) {
			var sidecars []string
			for _, sc := range g.Sidecars {
				sidecars = append(sidecars, filepath.Join(dir, sc))
			}
			// Each original is an asset of its own: the format has one
			// original per asset (cli/sealed/FORMAT.md §6.1).
			for _, o := range g.Originals {
				jobs = append(jobs, job{path: filepath.Join(dir, o), album: album, sidecars: sidecars})
			}
		}
		return nil
	})
	return jobs, err
}

// syncFile syncs one file and says what happened; err is the failure, if
// any, for the run to judge (stopsRun).
func (s *Syncer) syncFile(ctx context.Context, j job) (Event, error) {
	ev := Event{Path: j.path, Album: j.album}
	if j.album == "" {
		ev.What, ev.Error = "failed", "the folder cannot be read"
		return ev, nil
	}
	what, n, err := s.syncAsset(ctx, j, &ev)
	for tries := 1; errors.Is(err, errChanging) && tries < changingTries; tries++ {
		if serr := s.settle(ctx, j.path); serr != nil {
			err = serr
			break
		}
		what, n, err = s.syncAsset(ctx, j, &ev)
	}
	ev.What, ev.Bytes = what, n
	if fi, serr := os.Stat(j.path); serr == nil {
		ev.Size = fi.Size()
	}
	if err != nil {
		ev.What, ev.Error = "failed", err.Error()
	}
	return ev, err
}

// changingTries is how many times a file that changes while it is read is
// read, each time after it settled, before it is left for the next run.
const changingTries = 3

// settle returns once the file's size and time stayed the same for
// s.Settle; a file that is still changing after twenty of those (a log
// written to for ever) is left for the next run.
func (s *Syncer) settle(ctx context.Context, path string) error {
	step := max(s.Settle/4, time.Millisecond)
	size, modTime, _, _, err := statFile(path)
	if err != nil {
		return err
	}
	still, waited := time.Duration(0), time.Duration(0)
	for still < s.Settle {
		if waited >= 20*max(s.Settle, step) {
			return errChanging
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(step):
		}
		waited += step
		sz, mt, _, _, err := statFile(path)
		if err != nil {
			return err
		}
		if sz != size || mt != modTime {
			size, modTime, still = sz, mt, 0
			continue
		}
		still += step
	}
	return nil
}

// statFile is a file's size, modification time and inode.
func statFile(path string) (size, modTime int64, inode uint64, mt time.Time, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		inode = st.Ino
	}
	return fi.Size(), fi.ModTime().UnixNano(), inode, fi.ModTime(), nil
}

func (s *Syncer) syncAsset(ctx context.Context, j job, ev *Event) (string, int64, error) {
	size, modTime, inode, mt, err := statFile(j.path)
	if err != nil {
		return "", 0, err
	}
	if rec, err := s.Index.File(j.path); err != nil {
		return "", 0, err
	} else if rec != nil && rec.Unchanged(size, modTime, inode) {
		return "unchanged", 0, nil
	}
	album, err := s.album(ctx, j.album)
	if err != nil {
		return "", 0, err
	}
	contentHMAC, err := s.contentHMAC(j.path, size)
	if err != nil {
		return "", 0, err
	}
	if fileID, err := s.Index.AssetByContent(album.ID, contentHMAC); err != nil {
		return "", 0, err
	} else if fileID != "" {
		// The same bytes are an asset of this album already: a file moved
		// or renamed, or a copy. Nothing is sent.
		rec := &FileRecord{Size: size, ModTime: modTime, Inode: inode, AlbumID: album.ID, FileID: fileID, ContentHMAC: contentHMAC}
		if s.DryRun {
			return "known", 0, nil
		}
		return "known", 0, s.Index.Synced(j.path, rec)
	}
	if s.DryRun {
		return "would-upload", size, nil
	}
	ev.NoThumbnail = media.KindOf(j.path) != media.Image
	p, err := s.stage(j, album, size, modTime, mt, contentHMAC, ev)
	if err != nil {
		return "", 0, err
	}
	if err := s.send(ctx, j.path, album.ID, p); err != nil {
		return "", 0, err
	}
	rec := &FileRecord{Size: size, ModTime: modTime, Inode: inode, AlbumID: album.ID, FileID: p.FileID, ContentHMAC: contentHMAC,
		NoThumbnail: ev.NoThumbnail}
	if err := s.Index.Synced(j.path, rec); err != nil {
		return "", 0, err
	}
	if err := s.Index.DropPending(j.path); err != nil {
		return "", 0, err
	}
	p.remove()
	return "uploaded", size, nil
}

// stage makes everything the asset's upload sends, under the profile's
// state, and records it before a byte is sent: the sealed original, the
// sealed thumbnail and preview, the sealed metadata and the signed
// manifest. A run killed at any point after this resends exactly these
// bytes (the blobs are content-addressed and the op is answered as a
// replay), so no file becomes two assets and no asset holds blobs nobody
// refers to. An earlier run's staging of the same file, intact and of the
// same content, is used as it is.
func (s *Syncer) stage(j job, album *AlbumRecord, size, modTime int64, mt time.Time, contentHMAC string, ev *Event) (*PendingUpload, error) {
	if p, err := s.Index.Pending(j.path); err != nil {
		return nil, err
	} else if p != nil && p.ContentHMAC == contentHMAC && p.intact() {
		ev.NoThumbnail = len(p.Renditions) == 0
		return p, nil
	} else if p != nil {
		p.remove()
	}
	dir := filepath.Join(s.Profile.StateDir, "staged")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &PendingUpload{FileID: ids.UUID(rand.Reader), ContentHMAC: contentHMAC}
	assetKey, err := album.Key.DeriveAssetKey(p.FileID)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*PendingUpload, error) {
		p.remove()
		return nil, err
	}
	original, err := sealFile(dir, j.path, size, assetKey.BlobKey(sealed.RoleOriginal))
	if err != nil {
		return fail(err)
	}
	p.Original = original
	refs := map[sealed.Role]sealed.BlobRef{sealed.RoleOriginal: {Hash: original.Hash, Size: size}}
	probe := media.ProbeFile(j.path, mt, j.sidecars)
	if media.KindOf(j.path) == media.Image {
		if err := s.stageRenditions(dir, j.path, probe.Orientation, assetKey, p, refs); err != nil {
			// A photo Go cannot decode keeps its original; it shows no
			// thumbnail until a client that can make one replaces it.
			ev.NoThumbnail = true
		}
	}
	md := &sealed.Metadata{
		Name: filepath.Base(j.path), MediaType: media.MediaType(j.path), Size: size, Blobs: refs,
		ContentHMAC: contentHMAC, Taken: taken(probe), Width: int64(probe.Width), Height: int64(probe.Height),
		Extra: map[string]json.RawMessage{},
	}
	if probe.HasLocation {
		md.Location = &sealed.Location{Lat: probe.Latitude, Lon: probe.Longitude}
	}
	title, _ := json.Marshal(j.album)
	md.Extra[AlbumTitleKey] = title
	if p.Metadata, err = sealed.SealMetadata(assetKey, md); err != nil {
		return fail(err)
	}
	wrappedAlbumKey, err := s.Keys.Master.WrapAlbumKey(album.ID, 0, album.Key)
	if err != nil {
		return fail(err)
	}
	m := &sealed.Manifest{
		ProtocolVersion: album.ProtocolVersion, AlbumID: album.ID, FileID: p.FileID,
		CiphertextHash: original.Hash, PlaintextSize: size, KeyMode: "derived", MetadataBlobHash: hashOf(p.Metadata),
		CreatedByUser: s.Session.UserID, CreatedByDevice: s.Session.DeviceID, ClientVersion: s.ClientVersion,
		Timestamp: s.Now().UTC().Format(time.RFC3339), Action: "create", AlbumKey: wrappedAlbumKey,
	}
	if p.Manifest, err = m.Sign(s.Keys.Identity.Identity()); err != nil {
		return fail(err)
	}
	p.Envelope = m.Envelope()
	// A file written to between its stat and here may have given the
	// content hash, the sealed original and the metadata different bytes
	// even with its size unchanged: none of them is kept.
	if sz, mt, _, _, err := statFile(j.path); err != nil {
		return fail(err)
	} else if sz != size || mt != modTime {
		return fail(errChanging)
	}
	if err := s.Index.SavePending(j.path, p); err != nil {
		return fail(err)
	}
	return p, nil
}

// send sends a staged asset: its blobs, then its op.
func (s *Syncer) send(ctx context.Context, path, albumID string, p *PendingUpload) error {
	upload, err := s.upload(ctx, albumID)
	if err != nil {
		return err
	}
	if err := s.sendOriginal(ctx, path, upload, p); err != nil {
		return err
	}
	for _, r := range p.Renditions {
		if _, err := s.Client.PutBlob(ctx, upload, r.Hash, r.Size, openFile(r.Path)); err != nil {
			return err
		}
	}
	_, err = s.Client.ApplyOp(ctx, albumID, client.Op{ManifestEnvelope: p.Envelope, ManifestCBOR: p.Manifest, MetadataBlob: p.Metadata})
	return err
}

func openFile(path string) client.Content {
	return func() (io.Reader, error) { return os.Open(path) }
}

// AlbumTitleKey is the metadata blob's member that names the album the
// client filed the asset under (cli/sealed/FORMAT.md §6.1).
const AlbumTitleKey = "album"

// taken is the metadata's capture time from a probe.
func taken(p media.Probe) *sealed.Taken {
	t := &sealed.Taken{Local: p.Taken.Format("2006-01-02T15:04:05"), Source: p.TimeSource}
	if p.OffsetKnown {
		_, offset := p.Taken.Zone()
		minutes := offset / 60
		t.OffsetMinutes = &minutes
	}
	return t
}

// contentHMAC is the keyed hash of the file's bytes (FORMAT.md §6.3): what
// recognises a moved file without telling the server anything of it.
func (s *Syncer) contentHMAC(path string, size int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sealed.NewContentHMAC(s.Keys.Master)
	n, err := io.Copy(h, f)
	if err != nil {
		return "", err
	}
	if n != size {
		return "", errChanging
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// errChanging is a file that changed while it was read: it is read again
// once it has settled (Settle), and left for the next run when it keeps
// changing.
var errChanging = errors.New("the file kept changing while it was read; it is synced on the next run")

// sealFile seals the file at path (size bytes, under key) into a new
// file of dir, in bounded memory whatever the size, and returns it with its
// content address.
func sealFile(dir, path string, size int64, key sealed.BlobKey) (StagedBlob, error) {
	f, err := os.Open(path)
	if err != nil {
		return StagedBlob{}, err
	}
	defer f.Close()
	out, err := os.CreateTemp(dir, "blob-*")
	if err != nil {
		return StagedBlob{}, err
	}
	h := sha256.New()
	w, err := sealed.NewWriter(key, io.MultiWriter(out, h))
	if err == nil {
		var n int64
		n, err = io.Copy(w, f)
		if err == nil && n != size {
			err = errChanging
		}
		if err == nil {
			err = w.Close()
		}
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return StagedBlob{}, err
	}
	return StagedBlob{Path: out.Name(), Hash: hex.EncodeToString(h.Sum(nil)), Size: sealed.SealedSize(size)}, nil
}

// sendOriginal sends the sealed original: one PUT, or a tus transfer whose
// location is kept so a later run resumes it.
func (s *Syncer) sendOriginal(ctx context.Context, path, upload string, p *PendingUpload) error {
	o := p.Original
	content := openFile(o.Path)
	if o.Size < s.TusOver {
		_, err := s.Client.PutBlob(ctx, upload, o.Hash, o.Size, content)
		return err
	}
	if held, err := s.Client.Holds(ctx, o.Hash); err != nil || held {
		return err
	}
	if p.Location == "" {
		loc, err := s.Client.TusCreate(ctx, upload, o.Hash, o.Size)
		if err != nil {
			return err
		}
		p.Location = loc
		if err := s.Index.SavePending(path, p); err != nil {
			return err
		}
	}
	err := s.Client.TusUpload(ctx, p.Location, o.Hash, o.Size, content)
	if client.CodeOf(err) == "error.transfer.not_found" {
		// The transfer expired with its upload session: start another.
		p.Location = ""
		if err := s.Index.SavePending(path, p); err != nil {
			return err
		}
		return s.sendOriginal(ctx, path, upload, p)
	}
	return err
}

// stageRenditions makes the photo's thumbnail and preview and seals each
// into a file of dir, recording them in p and refs.
func (s *Syncer) stageRenditions(dir, path string, orientation int, k sealed.AssetKey, p *PendingUpload, refs map[sealed.Role]sealed.BlobRef) error {
	s.renderMu <- struct{}{}
	f, err := os.Open(path)
	if err != nil {
		<-s.renderMu
		return err
	}
	thumb, preview, err := media.Renditions(f, orientation)
	f.Close()
	<-s.renderMu
	if err != nil {
		return err
	}
	for _, r := range []struct {
		role  sealed.Role
		plain []byte
	}{{sealed.RoleThumbnail, thumb}, {sealed.RolePreview, preview}} {
		out, err := os.CreateTemp(dir, "blob-*")
		if err != nil {
			return err
		}
		h := sha256.New()
		w, err := sealed.NewWriter(k.BlobKey(r.role), io.MultiWriter(out, h))
		if err == nil {
			if _, err = w.Write(r.plain); err == nil {
				err = w.Close()
			}
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		b := StagedBlob{Path: out.Name(), Hash: hex.EncodeToString(h.Sum(nil)), Size: sealed.SealedSize(int64(len(r.plain)))}
		p.Renditions = append(p.Renditions, b)
		if err != nil {
			return err
		}
		refs[r.role] = sealed.BlobRef{Hash: b.Hash, Size: int64(len(r.plain))}
	}
	return nil
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// album is the album of that title, made on the server (and its key) the
// first time this device files a photo under it.
func (s *Syncer) album(ctx context.Context, title string) (*AlbumRecord, error) {
	s.albums.Lock()
	defer s.albums.Unlock()
	if a, err := s.Index.Album(title); err != nil || a != nil {
		return a, err
	}
	a := &AlbumRecord{ID: ids.UUID(rand.Reader), Key: sealed.NewAlbumKey()}
	version, err := s.Client.ProvisionAlbum(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	a.ProtocolVersion = version
	return a, s.Index.SaveAlbum(title, a)
}

// upload is this run's upload session on the album.
func (s *Syncer) upload(ctx context.Context, albumID string) (string, error) {
	s.albums.Lock()
	defer s.albums.Unlock()
	if id, ok := s.uploads[albumID]; ok {
		return id, nil
	}
	id, err := s.Client.OpenUpload(ctx, albumID)
	if err != nil {
		return "", err
	}
	s.uploads[albumID] = id
	return id, nil
}

// closeUploads closes the run's upload sessions; one left open expires.
func (s *Syncer) closeUploads(ctx context.Context) {
	for _, id := range s.uploads {
		_ = s.Client.CloseUpload(ctx, id)
	}
}
