package library

import (
	"bytes"
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
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"sealbox/cli/client"
	"sealbox/cli/media"
	"sealbox/cli/sealed"
	"sealbox/kv/durable"
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
	headsMu  sync.Mutex
	heads    map[string]map[string]client.FeedEntry // album id -> asset id -> its entry, listed once a run
}

// Event is what happened to one file.
type Event struct {
	Path string `json:"path"`
	// Companion is the asset's second original, when it has one.
	Companion string `json:"companion,omitempty"`
	// What: "uploaded", "updated" (its originals unchanged, a sidecar
	// added, changed or removed: the asset's metadata was sent again, its
	// originals not), "unchanged", "known" (the same content is already in
	// the album: a moved or renamed file), "would-upload" or
	// "would-update" (dry run), "skipped" (a symbolic link, which sync
	// does not follow; Error says so) or "failed".
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
// dry run would upload) by a sync, and exported or linked by an export;
// Updated the assets a sync sent new metadata of (or would).
type Summary struct {
	Done, Updated, Unchanged, Known, Failed, Skipped int
	Bytes                                            int64
	FailedPaths                                      []string
}

// count adds one event.
func (sum *Summary) count(ev Event) {
	switch ev.What {
	case "uploaded", "would-upload", "exported", "linked":
		sum.Done++
		sum.Bytes += ev.Bytes
	case "updated", "would-update":
		sum.Updated++
	case "unchanged":
		sum.Unchanged++
	case "known":
		sum.Known++
	case "failed":
		sum.Failed++
		sum.FailedPaths = append(sum.FailedPaths, ev.Path)
	case "skipped":
		sum.Skipped++
	}
}

// job is one asset to sync: its original, its second original when it has
// one (a Live Photo's video, a RAW+JPEG pair's raw file), the album it
// goes to and its sidecars; or a file only reported, skipped, saying why.
type job struct {
	path      string
	companion string
	album     string
	sidecars  []string
	skipped   string
}

// Sync syncs the folders roots (every photo and video below them).
func (s *Syncer) Sync(ctx context.Context, roots []string) (Summary, error) {
	s.uploads = map[string]string{}
	s.heads = map[string]map[string]client.FeedEntry{}
	s.renderMu = make(chan struct{}, 2)
	// The index logout removed knows no album: without the account's, every
	// file would be sent again, into a second album of its title.
	if err := s.Index.seed(ctx, &Catalog{Client: s.Client, Keys: s.Keys}); err != nil {
		return Summary{}, fmt.Errorf("read the account's albums into this device's new index: %w", err)
	}
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
			if j.skipped != "" {
				continue // nothing of it is read
			}
			for _, p := range []string{j.path, j.companion} {
				if fi, err := os.Stat(p); p != "" && err == nil {
					total += fi.Size()
				}
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
						if client.CodeOf(err) == fault.ECodeQuotaExceeded {
							// The numbers: what did not fit, and what did.
							stopped = fmt.Errorf("%s (%d bytes) does not fit, after %d files (%d bytes) uploaded in this run: %w",
								j.path, ev.Size, sum.Done, sum.Bytes, err)
						}
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
// folder's files so that sidecars travel with their photo. Links below the
// root are not followed, and are reported as skipped.
func (s *Syncer) walk(root string) ([]job, error) {
	given, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	root = given
	// WalkDir lists a root that is a symbolic link as the link alone: the
	// folder it leads to is walked instead. Only then, so that the paths
	// the index knows files by stay the ones given.
	if fi, err := os.Lstat(given); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if root, err = filepath.EvalSymlinks(given); err != nil {
			return nil, err
		}
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a folder", given)
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
			switch {
			case e.Type().IsRegular():
				names = append(names, e.Name())
			case e.Type()&fs.ModeSymlink != 0:
				// Not followed: a link may lead out of the folder, or
				// above it into a loop. It is listed, so a person who
				// linked photos in sees they were not sent.
				jobs = append(jobs, job{path: filepath.Join(dir, e.Name()),
					skipped: "a symbolic link: sync does not follow links inside a folder"})
			}
		}
		album := s.Album
		switch {
		case album != "":
		case s.AlbumPerFolder:
			album = filepath.Base(dir)
		default:
			// The folder as it was given: a link's name, not its target's.
			album = filepath.Base(given)
		}
		for _, g := range media.GroupFiles(names) {
			var sidecars []string
			for _, sc := range g.Sidecars {
				sidecars = append(sidecars, filepath.Join(dir, sc))
			}
			j := job{path: filepath.Join(dir, g.Originals[0]), album: album, sidecars: sidecars}
			if len(g.Originals) > 1 {
				j.companion = filepath.Join(dir, g.Originals[1])
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	return jobs, err
}

// syncFile syncs one file and says what happened; err is the failure, if
// any, for the run to judge (stopsRun).
func (s *Syncer) syncFile(ctx context.Context, j job) (Event, error) {
	ev := Event{Path: j.path, Companion: j.companion, Album: j.album}
	if j.skipped != "" {
		ev.What, ev.Error = "skipped", j.skipped
		return ev, nil
	}
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
	for _, p := range []string{j.path, j.companion} {
		if fi, serr := os.Stat(p); p != "" && serr == nil {
			ev.Size += fi.Size()
		}
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
	last, err := statOf(path)
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
		now, err := statOf(path)
		if err != nil {
			return err
		}
		if now.size != last.size || now.modTime != last.modTime {
			last, still = now, 0
			continue
		}
		still += step
	}
	return nil
}

func (s *Syncer) syncAsset(ctx context.Context, j job, ev *Event) (string, int64, error) {
	orig, err := statOf(j.path)
	if err != nil {
		return "", 0, err
	}
	var comp fileStat
	if j.companion != "" {
		if comp, err = statOf(j.companion); err != nil {
			return "", 0, err
		}
	}
	// Stamped before a sidecar is read: one written to meanwhile looks
	// changed to the next run.
	stamps, err := sidecarStamps(j.sidecars)
	if err != nil {
		return "", 0, err
	}
	if rec, err := s.unchanged(j, orig, comp); err != nil {
		return "", 0, err
	} else if rec != nil {
		switch {
		case slices.Equal(rec.Sidecars, stamps):
			return "unchanged", 0, nil
		case s.DryRun:
			return "would-update", 0, nil
		}
		return s.update(ctx, j, rec, orig, stamps)
	}
	album, err := s.album(ctx, j.album)
	if err != nil {
		return "", 0, err
	}
	hmacOrig, err := s.contentHMAC(j.path, orig.size)
	if err != nil {
		return "", 0, err
	}
	// An asset of two originals is known by both: the same still with
	// another video is another asset.
	content, hmacComp := hmacOrig, ""
	if j.companion != "" {
		if hmacComp, err = s.contentHMAC(j.companion, comp.size); err != nil {
			return "", 0, err
		}
		content = hmacOrig + "+" + hmacComp
	}
	size := orig.size + comp.size
	// A known asset's sidecars and head are those another file gave it:
	// nil and "" make the next run compare its sidecars with the head's.
	records := func(fileID string, noThumbnail bool, sidecars []SidecarStamp, head string) (*FileRecord, []FileAt) {
		rec := &FileRecord{Size: orig.size, ModTime: orig.modTime, Inode: orig.inode, AlbumID: album.ID, FileID: fileID,
			ContentHMAC: content, NoThumbnail: noThumbnail, Sidecars: sidecars, Head: head}
		if j.companion == "" {
			return rec, nil
		}
		return rec, []FileAt{{j.companion, &FileRecord{Size: comp.size, ModTime: comp.modTime, Inode: comp.inode,
			AlbumID: album.ID, FileID: fileID, ContentHMAC: hmacComp}}}
	}
	if fileID, err := s.Index.AssetByContent(album.ID, content); err != nil {
		return "", 0, err
	} else if fileID != "" {
		// The same bytes are an asset of this album already: a file moved
		// or renamed, or a copy. Nothing is sent.
		if s.DryRun {
			return "known", 0, nil
		}
		rec, more := records(fileID, false, nil, "")
		return "known", 0, s.Index.Synced(j.path, rec, more...)
	}
	if s.DryRun {
		return "would-upload", size, nil
	}
	ev.NoThumbnail = media.KindOf(j.path) != media.Image
	p, err := s.stage(j, album, orig, comp, stamps, content, hmacOrig, hmacComp, ev)
	if err != nil {
		return "", 0, err
	}
	if err := s.send(ctx, j.path, album.ID, p); err != nil {
		return "", 0, err
	}
	rec, more := records(p.FileID, ev.NoThumbnail, p.Sidecars, hashOf(p.Manifest))
	if err := s.Index.Synced(j.path, rec, more...); err != nil {
		return "", 0, err
	}
	if err := s.Index.DropPending(j.path); err != nil {
		return "", 0, err
	}
	p.remove()
	return "uploaded", size, nil
}

// fileStat is what tells a file unchanged: its size, time and inode.
type fileStat struct {
	size, modTime int64
	inode         uint64
	mt            time.Time
}

func statOf(path string) (fileStat, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStat{}, err
	}
	st := fileStat{size: fi.Size(), modTime: fi.ModTime().UnixNano(), mt: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.inode = sys.Ino
	}
	return st, nil
}

// jobFile is one original of a job's asset with what stat said of it.
type jobFile struct {
	path string
	st   fileStat
}

// files are the job's originals, the companion only when the asset has one,
// each with its stat.
func (j job) files(orig, comp fileStat) []jobFile {
	files := []jobFile{{j.path, orig}}
	if j.companion != "" {
		files = append(files, jobFile{j.companion, comp})
	}
	return files
}

// unchanged is the index's record of the asset's first original when its
// originals are the files the index recorded, nil when one is not.
func (s *Syncer) unchanged(j job, orig, comp fileStat) (*FileRecord, error) {
	var first *FileRecord
	for _, f := range j.files(orig, comp) {
		rec, err := s.Index.File(f.path)
		if err != nil || rec == nil || !rec.Unchanged(f.st.size, f.st.modTime, f.st.inode) {
			return nil, err
		}
		if first == nil {
			first = rec
		}
	}
	return first, nil
}

// sidecarStamps are the sidecar files' stamps, in the job's order.
func sidecarStamps(paths []string) ([]SidecarStamp, error) {
	var out []SidecarStamp
	for _, p := range paths {
		st, err := statOf(p)
		if err != nil {
			return nil, err
		}
		out = append(out, SidecarStamp{Name: filepath.Base(p), Size: st.size, ModTime: st.modTime, Inode: st.inode})
	}
	return out, nil
}

// stage makes everything the asset's upload sends, under the profile's
// state, and records it before a byte is sent: the sealed original (and
// companion), the sealed thumbnail and preview, the sealed metadata with
// the sidecars, and the signed manifest. A run killed at any point after
// this resends exactly these bytes (the blobs are content-addressed and
// the op is answered as a replay), so no file becomes two assets and no
// asset holds blobs nobody refers to. An earlier run's staging of the same
// files, intact, of the same content and for the same album, is used as it
// is; one for another album (the same folder synced again with another
// --album) is sealed again: its manifest names that album, so the server
// refuses it in an op on this one, and its blobs are sealed under that
// album's key.
func (s *Syncer) stage(j job, album *AlbumRecord, orig, comp fileStat, stamps []SidecarStamp, content, hmacOrig, hmacComp string, ev *Event) (*PendingUpload, error) {
	if p, err := s.Index.Pending(j.path); err != nil {
		return nil, err
	} else if p != nil && p.ContentHMAC == content && p.Envelope.AlbumID == album.ID && p.intact() {
		ev.NoThumbnail = len(p.Renditions) == 0
		return p, nil
	} else if p != nil {
		p.remove()
	}
	dir := filepath.Join(s.Profile.StateDir, stagedDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &PendingUpload{FileID: ids.UUID(rand.Reader), ContentHMAC: content, Sidecars: stamps}
	assetKey, err := album.Key.DeriveAssetKey(p.FileID)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*PendingUpload, error) {
		p.remove()
		return nil, err
	}
	if p.Original, err = sealFile(dir, j.path, orig.size, assetKey.BlobKey(sealed.RoleOriginal)); err != nil {
		return fail(err)
	}
	refs := map[sealed.Role]sealed.BlobRef{sealed.RoleOriginal: {Hash: p.Original.Hash, Size: orig.size}}
	md := &sealed.Metadata{
		Name: filepath.Base(j.path), MediaType: media.MediaType(j.path), Size: orig.size, Blobs: refs,
		ContentHMAC: hmacOrig, Extra: map[string]json.RawMessage{},
	}
	if j.companion != "" {
		if p.Companion, err = sealFile(dir, j.companion, comp.size, assetKey.BlobKey(sealed.RoleCompanion)); err != nil {
			return fail(err)
		}
		refs[sealed.RoleCompanion] = sealed.BlobRef{Hash: p.Companion.Hash, Size: comp.size}
		md.Companion = &sealed.Companion{ContentHMAC: hmacComp, MediaType: media.MediaType(j.companion),
			Name: filepath.Base(j.companion), Size: comp.size}
	}
	if md.Sidecars, err = readSidecars(j.sidecars); err != nil {
		return fail(err)
	}
	probe := media.ProbeFile(j.path, orig.mt, j.sidecars)
	if media.KindOf(j.path) == media.Image {
		if err := s.stageRenditions(dir, j.path, probe.Orientation, assetKey, p, refs); err != nil {
			// A photo Go cannot decode keeps its original; it shows no
			// thumbnail until a client that can make one replaces it.
			ev.NoThumbnail = true
		}
	}
	md.Taken, md.Width, md.Height = taken(probe), int64(probe.Width), int64(probe.Height)
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
		CiphertextHash: p.Original.Hash, PlaintextSize: orig.size, KeyMode: "derived", MetadataBlobHash: hashOf(p.Metadata),
		Action: "create", AlbumKey: wrappedAlbumKey,
	}
	if p.Manifest, err = s.sign(m); err != nil {
		return fail(err)
	}
	p.Envelope = m.Envelope()
	// A file written to between its stat and here may have given the
	// content hash, the sealed original and the metadata different bytes
	// even with its size unchanged: none of them is kept.
	for _, f := range j.files(orig, comp) {
		if now, err := statOf(f.path); err != nil {
			return fail(err)
		} else if now.size != f.st.size || now.modTime != f.st.modTime {
			return fail(errChanging)
		}
	}
	if err := s.Index.SavePending(j.path, p); err != nil {
		return fail(err)
	}
	return p, nil
}

// readSidecars reads an asset's sidecar files, which travel in its
// metadata (cli/sealed/FORMAT.md §6.1), at most sealed.MaxSidecars bytes
// together.
func readSidecars(paths []string) ([]sealed.Sidecar, error) {
	var out []sealed.Sidecar
	total := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if total += len(b); total > sealed.MaxSidecars {
			return nil, fmt.Errorf("its sidecars are over %d bytes together, more than an asset carries", sealed.MaxSidecars)
		}
		out = append(out, sealed.Sidecar{Name: filepath.Base(p), Data: b})
	}
	return out, nil
}

// send sends a staged asset: its blobs, then its op.
func (s *Syncer) send(ctx context.Context, path, albumID string, p *PendingUpload) error {
	upload, err := s.upload(ctx, albumID)
	if err != nil {
		return err
	}
	if err := s.sendLarge(ctx, path, upload, p, p.Original, &p.Location); err != nil {
		return err
	}
	if p.Companion.Path != "" {
		if err := s.sendLarge(ctx, path, upload, p, p.Companion, &p.CompanionLocation); err != nil {
			return err
		}
	}
	for _, r := range p.Renditions {
		if _, err := s.Client.PutBlob(ctx, upload, r.Hash, r.Size, openFile(r.Path)); err != nil {
			return err
		}
	}
	_, err = s.Client.ApplyOp(ctx, albumID, client.Op{ManifestEnvelope: p.Envelope, ManifestCBOR: p.Manifest, MetadataBlob: p.Metadata})
	return err
}

// sign names this device and run as the writer of m, and now as its time,
// and signs it with the account's identity key: manifest_cbor.
func (s *Syncer) sign(m *sealed.Manifest) ([]byte, error) {
	m.CreatedByUser, m.CreatedByDevice, m.ClientVersion = s.Session.UserID, s.Session.DeviceID, s.ClientVersion
	m.Timestamp = s.Now().UTC().Format(time.RFC3339)
	return m.Sign(s.Keys.Identity.Identity())
}

// staleTries is how many times update rebuilds its replace on a chain head
// another device moved on before it gives up for this run.
const staleTries = 3

// update writes the asset's metadata again with its sidecars as they are
// now, as a replace op continuing its chain (cli/sealed/FORMAT.md §7.4):
// the same original, companion and renditions, which the server holds
// already, so none is read or sent; a new metadata blob sealed under the
// asset's metadata key. The metadata is the chain head's with only its
// sidecars and capture time made afresh, so what another device wrote
// in it, and members this client does not know, are kept. Sidecars whose
// bytes are the head's (a file touched, an index from before sidecars
// were recorded) send nothing. An asset in the trash, or in an album in
// the trash, takes no replace (server/PROTOCOL.md §9): sync leaves it as
// the person left it, and reports its file unchanged.
func (s *Syncer) update(ctx context.Context, j job, rec *FileRecord, orig fileStat, stamps []SidecarStamp) (string, int64, error) {
	sidecars, err := readSidecars(j.sidecars)
	if err != nil {
		return "", 0, err
	}
	cat := &Catalog{Client: s.Client, Keys: s.Keys}
	head, lost := rec.Head, false
	for tries := 1; ; tries++ {
		if head == "" {
			e, err := s.chainHead(ctx, rec.AlbumID, rec.FileID, lost)
			if err != nil {
				return "", 0, err
			}
			if e.Action == "delete" {
				return "unchanged", 0, s.restamp(j.path, rec, stamps, "")
			}
			head = e.ManifestHash
		}
		a, err := cat.open(ctx, rec.AlbumID, client.FeedEntry{AssetID: rec.FileID, ManifestHash: head})
		if err != nil {
			return "", 0, err
		}
		if a.Manifest.FileID != rec.FileID {
			return "", 0, fmt.Errorf("the manifest %s is not asset %s's", head, rec.FileID)
		}
		if slices.EqualFunc(a.Meta.Sidecars, sidecars, func(x, y sealed.Sidecar) bool {
			return x.Name == y.Name && bytes.Equal(x.Data, y.Data)
		}) {
			return "unchanged", 0, s.restamp(j.path, rec, stamps, head)
		}
		md := *a.Meta
		md.Sidecars, md.Taken = sidecars, retaken(a.Meta.Taken, j.path, orig.mt, sidecars)
		metadata, err := sealed.SealMetadata(a.Key, &md)
		if err != nil {
			return "", 0, err
		}
		// The head's manifest keeps the asset's keys, original and
		// retention; the original's blob is named again, as a replace must.
		m := *a.Manifest
		m.MetadataBlobHash, m.Action, m.PriorProvenanceHash = hashOf(metadata), "replace", head
		if m.OriginalBlobHash == "" {
			m.OriginalBlobHash = m.CiphertextHash
		}
		manifest, err := s.sign(&m)
		if err != nil {
			return "", 0, err
		}
		_, err = s.Client.ApplyOp(ctx, rec.AlbumID, client.Op{ManifestEnvelope: m.Envelope(), ManifestCBOR: manifest, MetadataBlob: metadata})
		switch code := client.CodeOf(err); {
		case code == fault.ECodeOpStaleChain && tries < staleTries:
			// Another device wrote the asset meanwhile: its new head is
			// read, and the metadata rebuilt on it.
			head, lost = "", true
			continue
		case code == fault.ECodeAssetDeleted || code == fault.ECodeAlbumDeleted:
			return "unchanged", 0, s.restamp(j.path, rec, stamps, "")
		case err != nil:
			return "", 0, err
		}
		return "updated", 0, s.restamp(j.path, rec, stamps, hashOf(manifest))
	}
}

// chainHead is the asset's entry in its album's list of assets: its chain
// head, or its tombstone while it is in the trash (server/PROTOCOL.md §9).
// Only an asset whose head this device does not know needs it (every one
// with sidecars, the first run after an index without heads), so the list
// is read once a run, and again when fresh (a head lost to a race).
func (s *Syncer) chainHead(ctx context.Context, albumID, assetID string, fresh bool) (client.FeedEntry, error) {
	s.headsMu.Lock()
	defer s.headsMu.Unlock()
	listed, ok := s.heads[albumID]
	if !ok || fresh {
		assets, _, err := s.Client.AllAssets(ctx, albumID)
		if err != nil {
			return client.FeedEntry{}, err
		}
		listed = make(map[string]client.FeedEntry, len(assets))
		for _, e := range assets {
			listed[e.AssetID] = e
		}
		s.heads[albumID] = listed
	}
	if e, ok := listed[assetID]; ok {
		return e, nil
	}
	return client.FeedEntry{}, fmt.Errorf("asset %s is not in its album %s on the server", assetID, albumID)
}

// restamp records the asset's sidecars as its metadata on the server now
// carries them, and its chain head as this device knows it.
func (s *Syncer) restamp(path string, rec *FileRecord, stamps []SidecarStamp, head string) error {
	r := *rec
	r.Sidecars, r.Head = stamps, head
	return s.Index.Synced(path, &r)
}

// retaken is the capture time of an asset whose sidecars changed: a time
// from its original's EXIF stays, which a sidecar never overrides; any
// other is found again as media.ProbeFile finds it without EXIF, from the
// sidecars given, the original's name and its file time.
func retaken(was *sealed.Taken, path string, modTime time.Time, sidecars []sealed.Sidecar) *sealed.Taken {
	if was != nil && was.Source == media.SourceEXIF {
		return was
	}
	packets := make([][]byte, len(sidecars))
	for i, sc := range sidecars {
		packets[i] = sc.Data
	}
	var p media.Probe
	p.TimeWithoutEXIF(path, modTime, packets)
	return taken(p)
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
	err = durable.Close(out, err)
	if err != nil {
		os.Remove(out.Name())
		return StagedBlob{}, err
	}
	return StagedBlob{Path: out.Name(), Hash: hex.EncodeToString(h.Sum(nil)), Size: sealed.SealedSize(size)}, nil
}

// sendLarge sends a sealed original (or companion) o of p: one PUT, or a
// tus transfer whose location is kept in *loc, and with p, so a later run
// resumes it.
func (s *Syncer) sendLarge(ctx context.Context, path, upload string, p *PendingUpload, o StagedBlob, loc *string) error {
	content := openFile(o.Path)
	if o.Size < s.TusOver {
		_, err := s.Client.PutBlob(ctx, upload, o.Hash, o.Size, content)
		return err
	}
	if held, err := s.Client.Holds(ctx, o.Hash); err != nil || held {
		return err
	}
	if *loc == "" {
		created, err := s.Client.TusCreate(ctx, upload, o.Hash, o.Size)
		if err != nil {
			return err
		}
		*loc = created
		if err := s.Index.SavePending(path, p); err != nil {
			return err
		}
	}
	err := s.Client.TusUpload(ctx, *loc, o.Hash, o.Size, content)
	if client.CodeOf(err) == "error.transfer.not_found" {
		// The transfer expired with its upload session: start another.
		*loc = ""
		if err := s.Index.SavePending(path, p); err != nil {
			return err
		}
		return s.sendLarge(ctx, path, upload, p, o, loc)
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
		// Synced like the original: a run after a power cut reuses a staged
		// file whose size is right (intact), so its bytes must be there too.
		err = durable.Close(out, err)
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
