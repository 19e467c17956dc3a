package admin

import (
	"context"
	"errors"
	"fmt"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/server/content"
)

// CheckReport lists every problem found; none means the data is whole.
type CheckReport struct {
	// Store and BlobStore name where the check looked.
	Store     string   `json:"store"`
	BlobStore string   `json:"blob_store"`
	Blobs     int      `json:"blobs"`
	Deep      bool     `json:"deep"`
	Problems  []string `json:"problems"`
}

// maxReported bounds the problems of one kind that a check lists.
const maxReported = 1000

// Check verifies the store's own page structure (bbolt's check), that the
// transparency log's stored hashes are those of its records and rebuild its
// last signed checkpoint, that every account's usage is the sum of what it
// holds, that every blob a share link, upload session or provenance chain names is recorded, that every
// recorded blob exists with its recorded size (a file of the blob store, or
// bytes the store keeps inline), and with deep that every such blob's bytes
// still hash to its name. The data directory's keys are checked as a
// restore reads them: a key that is there must be a regular file of its
// format, or no server can start on the directory.
func (o *Ops) Check(ctx context.Context, deep bool) (CheckReport, error) {
	rep := CheckReport{Store: o.StoreAt, BlobStore: o.BlobsAt, Deep: deep, Problems: []string{}}
	if _, err := readKeys(o.DataDir); err != nil {
		rep.Problems = append(rep.Problems, "keys: "+err.Error())
	}
	integrity, err := o.Store.CheckIntegrity()
	if err != nil {
		return rep, err
	}
	for _, e := range integrity {
		rep.Problems = append(rep.Problems, "store: "+e.Error())
	}
	dangling, err := o.Store.DanglingReferences(maxReported)
	if err != nil {
		return rep, err
	}
	rep.Problems = append(rep.Problems, dangling...)
	logProblems, err := o.Store.CheckLog(maxReported)
	if err != nil {
		return rep, err
	}
	rep.Problems = append(rep.Problems, logProblems...)
	usageProblems, err := o.Store.UsageProblems(maxReported)
	if err != nil {
		return rep, err
	}
	rep.Problems = append(rep.Problems, usageProblems...)
	inlineProblems, err := o.Store.InlineProblems(deep, maxReported)
	if err != nil {
		return rep, err
	}
	rep.Problems = append(rep.Problems, inlineProblems...)
	// A store whose blobs are all gone has a problem per blob: the first
	// maxReported are listed and the rest counted, so the report stays
	// bounded however large the store.
	listed, more := len(rep.Problems), 0
	blobProblem := func(format string, args ...any) {
		if len(rep.Problems)-listed < maxReported {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...))
		} else {
			more++
		}
	}
	inline := func(kv.Blob) error {
		rep.Blobs++
		return nil // checked with the store (InlineProblems): no file to look for
	}
	err = content.Walk(ctx, o.Store, inline, func(b kv.Blob) error {
		rep.Blobs++
		return o.checkBlob(b, deep, blobProblem)
	})
	if more > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("blobs: %d more problems like those above, not listed", more))
	}
	return rep, err
}

// checkBlob reports through problem a recorded blob that is missing, not
// its recorded size or, with deep, no longer hashes to its name.
func (o *Ops) checkBlob(b kv.Blob, deep bool, problem func(format string, args ...any)) error {
	info, err := o.Blobs.Stat(b.Hash)
	switch {
	case errors.Is(err, blobs.ErrNotFound):
		problem("blob %s: referenced but missing", b.Hash)
		return nil
	case err != nil:
		return err
	case info.Size != b.Size:
		problem("blob %s: %d bytes on disk, %d recorded", b.Hash, info.Size, b.Size)
		return nil
	}
	if deep {
		if err := o.Blobs.Verify(b.Hash); errors.Is(err, blobs.ErrCorrupt) {
			problem("blob %s: its bytes no longer hash to its name", b.Hash)
		} else if err != nil {
			return err
		}
	}
	return nil
}
