package admin

import (
	"context"
	"time"

	"sealbox/blobs"
)

// GCReport says what garbage collection removed (or, dry, would remove).
type GCReport struct {
	DryRun       bool  `json:"dry_run"`
	BlobsRemoved int   `json:"blobs_removed"`
	BytesFreed   int64 `json:"bytes_freed"`
	TempRemoved  int   `json:"temp_removed"`
	RecordsSwept int   `json:"records_swept"`
}

// GC deletes expired records, and blob files that no account holds and
// that are older than grace: an upload writes its file before it records
// the holding, and a blob younger than grace may be such an upload in
// progress. blobs.Collect keeps a file that an upload of the same bytes
// claimed meanwhile. With dryRun nothing is removed and the report says what
// would be.
func (o *Ops) GC(ctx context.Context, dryRun bool, grace time.Duration) (GCReport, error) {
	rep := GCReport{DryRun: dryRun}
	// File times are wall-clock facts, so the cutoff is too.
	cutoff := time.Now().Add(-grace)
	if !dryRun {
		n, err := o.Store.Sweep()
		if err != nil {
			return rep, err
		}
		rep.RecordsSwept = n
	}
	err := o.Blobs.Walk(func(info blobs.Info) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !info.ModTime.Before(cutoff) {
			return nil
		}
		recorded, err := o.Store.BlobRecorded(info.Hash)
		if err != nil || recorded {
			return err
		}
		if dryRun {
			rep.BlobsRemoved++
			rep.BytesFreed += info.Size
			return nil
		}
		removed, err := o.Blobs.Collect(info.Hash, cutoff)
		if removed {
			rep.BlobsRemoved++
			rep.BytesFreed += info.Size
		}
		return err
	})
	if err != nil || dryRun {
		return rep, err
	}
	rep.TempRemoved, err = o.Blobs.CleanTemp(cutoff)
	return rep, err
}
