package library

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"sealbox/cli/sealed"
)

// Index is the client's local record of what it synced, in a bbolt file of
// the profile's state: each file by its path with the size, modification
// time and inode it had when it was sealed (so a second sync reads no file
// that did not change), each asset by its keyed content hash within its
// album (so a moved or renamed file is recognised and not sent again), the
// albums this device made with their keys, and the sealed files of
// unfinished resumable uploads. A new index is filled from the account's
// albums on the server before its first sync (seed).
type Index struct {
	db *bolt.DB
}

var (
	bucketFiles     = []byte("files")
	bucketContent   = []byte("content")
	bucketAlbums    = []byte("albums")
	bucketTransfers = []byte("transfers")
	bucketLinks     = []byte("links")
	// bucketMeta holds keySeeded once seed has run.
	bucketMeta = []byte("meta")
	keySeeded  = []byte("seeded")
)

// indexFile is the index, and stagedDir the folder of the staged uploads'
// sealed files, in the profile's state directory.
const (
	indexFile = "index.db"
	stagedDir = "staged"
)

// OpenIndex opens (or creates) the index in the profile's state directory.
// A second client on the same profile waits a second for it, then fails.
func (p *Profile) OpenIndex() (*Index, error) {
	path := filepath.Join(p.StateDir, indexFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("another sealbox client is using the profile %s: wait for it, or give another --profile", p.StateDir)
	}
	if err != nil {
		return nil, fmt.Errorf("the client's index %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketFiles, bucketContent, bucketAlbums, bucketTransfers, bucketLinks, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Index{db: db}, nil
}

// Close closes the index.
func (ix *Index) Close() error { return ix.db.Close() }

// FileRecord is a file as it was when it was synced.
type FileRecord struct {
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
	Inode   uint64 `json:"inode"`
	AlbumID string `json:"album_id"`
	FileID  string `json:"file_id"`
	// ContentHMAC is the keyed hash of its bytes (cli/sealed/FORMAT.md
	// §6.3), never a plain hash.
	ContentHMAC string `json:"content_hmac"`
	// NoThumbnail: the client could make no thumbnail of it (HEIC, RAW,
	// video, or a photo it could not decode); its original is kept.
	NoThumbnail bool `json:"no_thumbnail,omitempty"`
	// Sidecars are the asset's sidecar files as they were when its
	// metadata was last written, by name (on an asset's first original
	// only): one added, removed or changed since makes the asset's
	// metadata written again, its originals not read.
	Sidecars []SidecarStamp `json:"sidecars,omitempty"`
	// Head is the manifest hash of the op this device last applied to
	// the asset (its chain head then, server/PROTOCOL.md §14); "" when
	// this device applied none (a moved file, an index seeded from the
	// server, an index written before this field).
	Head string `json:"head,omitempty"`
}

// Unchanged reports whether a file of that size, time and inode is the
// one recorded.
func (r *FileRecord) Unchanged(size, modTime int64, inode uint64) bool {
	return r.Size == size && r.ModTime == modTime && r.Inode == inode
}

// SidecarStamp is what tells a sidecar file unchanged: its name, size,
// time and inode.
type SidecarStamp struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
	Inode   uint64 `json:"inode"`
}

// AlbumRecord is an album this account files photos in, by its title.
type AlbumRecord struct {
	ID              string          `json:"id"`
	Key             sealed.AlbumKey `json:"key"`
	ProtocolVersion string          `json:"protocol_version"`
}

// PendingUpload is an asset staged for upload and not yet recorded as
// synced: its sealed blobs in files of the profile's state, its sealed
// metadata and signed manifest, and the tus location of its original once
// a transfer was started. A later run sends exactly these bytes again.
type PendingUpload struct {
	FileID      string     `json:"file_id"`
	ContentHMAC string     `json:"content_hmac"`
	Original    StagedBlob `json:"original"`
	// Companion is the asset's second original (a Live Photo's video, a
	// RAW+JPEG pair's raw file), sealed; its Path is "" when it has none.
	Companion         StagedBlob      `json:"companion,omitzero"`
	CompanionLocation string          `json:"companion_location,omitempty"`
	Renditions        []StagedBlob    `json:"renditions,omitempty"`
	Metadata          []byte          `json:"metadata"`
	Manifest          []byte          `json:"manifest"`
	Envelope          sealed.Envelope `json:"envelope"`
	Location          string          `json:"location,omitempty"`
	// Sidecars are the sidecar files as they were before Metadata read
	// them.
	Sidecars []SidecarStamp `json:"sidecars,omitempty"`
}

// StagedBlob is a sealed blob in a file, with its content address and
// sealed size.
type StagedBlob struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
	Size int64  `json:"size"`
}

// intact reports whether every staged file is still there whole.
func (p *PendingUpload) intact() bool {
	for _, b := range p.blobs() {
		if fi, err := os.Stat(b.Path); err != nil || fi.Size() != b.Size {
			return false
		}
	}
	return len(p.Manifest) > 0 && len(p.Metadata) > 0
}

// remove removes the staged files.
func (p *PendingUpload) remove() {
	for _, b := range p.blobs() {
		os.Remove(b.Path)
	}
}

// blobs are the staged blob files: the original, the companion when there
// is one, and the renditions.
func (p *PendingUpload) blobs() []StagedBlob {
	var out []StagedBlob
	for _, b := range append([]StagedBlob{p.Original, p.Companion}, p.Renditions...) {
		if b.Path != "" {
			out = append(out, b)
		}
	}
	return out
}

func get[T any](ix *Index, bucket []byte, key string) (*T, error) {
	var out *T
	err := ix.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(key))
		if v == nil {
			return nil
		}
		out = new(T)
		return json.Unmarshal(v, out)
	})
	return out, err
}

func put(ix *Index, bucket []byte, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return ix.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(key), b) })
}

func del(ix *Index, bucket []byte, key string) error {
	return ix.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Delete([]byte(key)) })
}

// File is the record of the file at path, nil when it was never synced.
func (ix *Index) File(path string) (*FileRecord, error) {
	return get[FileRecord](ix, bucketFiles, path)
}

// FileAt is a file's record at its path.
type FileAt struct {
	Path   string
	Record *FileRecord
}

// Synced records the file at path as the asset it became, and the asset
// under its content hash, and so each of more (the asset's other
// original), all in one transaction.
func (ix *Index) Synced(path string, r *FileRecord, more ...FileAt) error {
	files := append([]FileAt{{path, r}}, more...)
	encoded := make([][]byte, len(files))
	for i, f := range files {
		b, err := json.Marshal(f.Record)
		if err != nil {
			return err
		}
		encoded[i] = b
	}
	return ix.db.Update(func(tx *bolt.Tx) error {
		for i, f := range files {
			if err := tx.Bucket(bucketFiles).Put([]byte(f.Path), encoded[i]); err != nil {
				return err
			}
			if err := tx.Bucket(bucketContent).Put([]byte(f.Record.AlbumID+"/"+f.Record.ContentHMAC), []byte(f.Record.FileID)); err != nil {
				return err
			}
		}
		return nil
	})
}

// AssetByContent is the asset of the album holding content of that keyed
// hash, "" when none does.
func (ix *Index) AssetByContent(albumID, contentHMAC string) (string, error) {
	var id string
	err := ix.db.View(func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bucketContent).Get([]byte(albumID + "/" + contentHMAC)))
		return nil
	})
	return id, err
}

// Album is the album of that title, nil when this device has none.
func (ix *Index) Album(title string) (*AlbumRecord, error) {
	return get[AlbumRecord](ix, bucketAlbums, title)
}

// SaveAlbum records the album of that title.
func (ix *Index) SaveAlbum(title string, a *AlbumRecord) error {
	return put(ix, bucketAlbums, title, a)
}

// seed fills an index that knows no album (a new one: after a logout and
// a sign-in, or on a new device) from the account's albums on the server,
// read and opened as export opens them: each album under the title its
// photos were filed under, with the key its manifests carry wrapped under
// the master key, and each photo under its keyed content hash (FORMAT.md
// §6.3) from its sealed metadata. So a sync files photos in the albums of
// their titles that the account already has, and sends none that is there
// again. Only reads are sent: no plaintext and no hash of one. Left out are
// an album in the trash (it takes no op), an album none of whose photos
// opens (its key is only in its photos' manifests: an empty one, made by a
// sync whose every upload failed) and a photo in the trash (its chain ends
// in a tombstone), so a sync sends their files again. Of two albums of one
// title, the oldest is taken. Written in one transaction with a mark, so
// an index is seeded once, and an index a sync already filed photos in
// never.
func (ix *Index) seed(ctx context.Context, cat *Catalog) error {
	var done bool
	err := ix.db.View(func(tx *bolt.Tx) error {
		done = tx.Bucket(bucketMeta).Get(keySeeded) != nil
		if k, _ := tx.Bucket(bucketAlbums).Cursor().First(); k != nil {
			done = true
		}
		return nil
	})
	if err != nil || done {
		return err
	}
	albums, err := cat.Client.Albums(ctx)
	if err != nil {
		return err
	}
	type titled struct {
		title  string
		record []byte
	}
	var found []titled // oldest first, as the server lists them
	content := map[string]string{}
	for _, a := range albums {
		if a.DeletedAt != "" {
			continue
		}
		assets, _, err := cat.Assets(ctx, a.AlbumID)
		if err != nil {
			return err
		}
		if len(assets) == 0 {
			continue
		}
		for _, as := range assets {
			c := as.Meta.ContentHMAC
			if comp := as.Meta.Companion; comp != nil {
				c += "+" + comp.ContentHMAC // as sync keys an asset of two originals
			}
			content[a.AlbumID+"/"+c] = as.Entry.AssetID
		}
		// Assets opened every asset with the album's key, unwrapped from
		// its manifests.
		record, err := json.Marshal(&AlbumRecord{ID: a.AlbumID, Key: cat.albumKeys[a.AlbumID], ProtocolVersion: a.ProtocolVersion})
		if err != nil {
			return err
		}
		found = append(found, titled{assets[0].AlbumTitle, record})
	}
	return ix.db.Update(func(tx *bolt.Tx) error {
		albums := tx.Bucket(bucketAlbums)
		for _, f := range found {
			if albums.Get([]byte(f.title)) != nil {
				continue // an older album of this title is taken
			}
			if err := albums.Put([]byte(f.title), f.record); err != nil {
				return err
			}
		}
		for k, id := range content {
			if err := tx.Bucket(bucketContent).Put([]byte(k), []byte(id)); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keySeeded, []byte{1})
	})
}

// Pending is the unfinished upload of the file at path, nil when none.
func (ix *Index) Pending(path string) (*PendingUpload, error) {
	return get[PendingUpload](ix, bucketTransfers, path)
}

// SavePending records the unfinished upload of the file at path.
func (ix *Index) SavePending(path string, u *PendingUpload) error {
	return put(ix, bucketTransfers, path, u)
}

// DropPending forgets the unfinished upload of the file at path.
func (ix *Index) DropPending(path string) error { return del(ix, bucketTransfers, path) }

// SaveLink records a link this device made. Its URL holds the link's
// secret: the index is as private as the keys, and goes with them at
// sign-out (Forget).
func (ix *Index) SaveLink(l *Link) error { return put(ix, bucketLinks, l.ID, l) }

// DropLink forgets a link.
func (ix *Index) DropLink(id string) error { return del(ix, bucketLinks, id) }

// Links are the links this device made, by id.
func (ix *Index) Links() ([]Link, error) {
	var links []Link
	err := ix.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLinks).ForEach(func(_, v []byte) error {
			var l Link
			if err := json.Unmarshal(v, &l); err != nil {
				return err
			}
			links = append(links, l)
			return nil
		})
	})
	return links, err
}

// Stats are what the index knows of the synced files.
type Stats struct {
	Files int `json:"files"`
	// NoThumbnail are the synced files of which no thumbnail could be
	// made, by path.
	NoThumbnail []string `json:"no_thumbnail"`
	// Pending is how many files are staged and not yet all sent.
	Pending int `json:"pending"`
}

// Stats counts the synced files.
func (ix *Index) Stats() (Stats, error) {
	st := Stats{NoThumbnail: []string{}}
	err := ix.db.View(func(tx *bolt.Tx) error {
		st.Pending = tx.Bucket(bucketTransfers).Stats().KeyN
		return tx.Bucket(bucketFiles).ForEach(func(k, v []byte) error {
			var r FileRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			st.Files++
			if r.NoThumbnail {
				st.NoThumbnail = append(st.NoThumbnail, string(k))
			}
			return nil
		})
	})
	return st, err
}
