package library

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"time"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
)

// maxServes is the most blobs one link may serve (server/PROTOCOL.md §7).
const maxServes = 10_000

// Link is a share link this device made.
type Link struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	URL       string     `json:"url"`
	Assets    int        `json:"assets"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Created   time.Time  `json:"created"`
}

// Share makes a link to the assets (cli/sealed/FORMAT.md §9): their keys in
// a share index sealed under the link key, the index stored as a blob of
// the album, and the link registered with every blob a viewer needs. The
// link's secret is only in the returned URL's fragment; with a passphrase,
// the server keeps the link key wrapped under it and the secret.
func Share(ctx context.Context, c *client.Client, title string, assets []Asset, passphrase string, expires *time.Time) (*Link, error) {
	if len(assets) == 0 {
		return nil, fmt.Errorf("nothing to share in %q", title)
	}
	secret := sealed.NewLinkSecret()
	linkKey := secret.Key()
	var wrapped []byte
	if passphrase != "" {
		var err error
		if linkKey, wrapped, err = sealed.WrapLinkKey(secret, passphrase, sealed.MinPBKDF2Iterations); err != nil {
			return nil, err
		}
	}
	idx := &sealed.ShareIndex{Title: title}
	var serves []string
	for _, a := range assets {
		idx.Items = append(idx.Items, sealed.ShareItem{AssetKey: a.Key, FileID: a.Entry.AssetID, MetadataHash: a.Entry.MetadataBlobHash})
		serves = append(serves, a.Entry.MetadataBlobHash)
		// Every role's blob, the companion's included: the viewer plays a
		// Live Photo's video (FORMAT.md §9.3).
		for _, ref := range a.Meta.Blobs {
			serves = append(serves, ref.Hash)
		}
	}
	index, err := sealed.SealShareIndex(linkKey, idx)
	if err != nil {
		return nil, err
	}
	indexHash := hashOf(index)
	serves = append(serves, indexHash)
	slices.Sort(serves)
	serves = slices.Compact(serves)
	if len(serves) > maxServes {
		return nil, fmt.Errorf("a link serves at most %d blobs, and these assets need %d: share fewer at once", maxServes, len(serves))
	}
	upload, err := c.OpenUpload(ctx, assets[0].AlbumID)
	if err != nil {
		return nil, err
	}
	defer c.CloseUpload(ctx, upload)
	if _, err := c.PutBlob(ctx, upload, indexHash, int64(len(index)), func() (io.Reader, error) { return bytes.NewReader(index), nil }); err != nil {
		return nil, err
	}
	var id [16]byte
	rand.Read(id[:])
	link := &Link{ID: hex.EncodeToString(id[:]), Title: title, Assets: len(assets), ExpiresAt: expires, Created: time.Now()}
	if err := c.CreateShare(ctx, client.Share{OpaqueID: link.ID, MetadataHash: indexHash, Serves: serves, WrappedSecret: wrapped, ExpiresAt: expires}); err != nil {
		return nil, err
	}
	link.URL = c.BaseURL() + "/s/" + link.ID + "#" + secret.Fragment()
	return link, nil
}
