package admin

import (
	"context"
	"errors"
	"time"

	"sealbox/blobs"
)

// GCReport says what garbage collection removed (or, dry, would remove).
type GCReport struct {
	DryRun       bool  `json:"dry_run"`
	BlobsRemoved int   `json:"blobs_removed"`
	BytesFreed   int64 `json:"bytes_freed"`
	TempRemoved  int   `json:"temp_removed"`
	// PartialsRemoved are partial files of resumable transfers that no
	// longer exist (finished, terminated or expired ones whose file stayed).
	PartialsRemoved int   `json:"partials_removed"`
	PartialBytes    int64 `json:"partial_bytes"`
	RecordsSwept    int   `json:"records_swept"`
}

// GC deletes expired records, partial files of transfers that no longer
// exist, and blob files that no account holds and
// that are older than grace: an upload writes its file before it records
// the holding, and a blob younger than grace may be such an upload in
// progress. blobs.Collect keeps a file that an upload of the same bytes
// claimed meanwhile. With dryRun nothing is removed and the report says what
// would be.
func (o *Ops) GC(ctx context.Context, dryRun bool, grace time.Duration) (GCReport, error) {
	rep := GCReport{DryRun: dryRun}
	// File times are wall-clock facts, so the cutoff is too.
	cutoff := time.Now().Add(-grace)
	var err error
	if dryRun {
		rep.RecordsSwept, err = o.Store.DueExpiries()
	} else {
		rep.RecordsSwept, err = o.Store.Sweep()
	}
	if err != nil {
		return rep, err
	}
	// Candidates are checked against the store a page at a time, one read
	// transaction per page, as the walk lists them.
	page := make([]blobs.Info, 0, blobPage)
	collect := func() error {
		hashes := make([]string, len(page))
		for i, info := range page {
			hashes[i] = info.Hash
		}
		recorded, err := o.Store.BlobsRecorded(hashes)
		if err != nil {
			return err
		}
		for _, info := range page {
			if recorded[info.Hash] {
				continue
			}
			if dryRun {
				rep.BlobsRemoved++
				rep.BytesFreed += info.Size
				continue
			}
			removed, err := o.Blobs.Collect(info.Hash, cutoff)
			if errors.Is(err, blobs.ErrNotFound) {
				continue // removed since the walk listed it
			}
			if err != nil {
				return err
			}
			if removed {
				rep.BlobsRemoved++
				rep.BytesFreed += info.Size
			}
		}
		page = page[:0]
		return nil
	}
	err = o.Blobs.Walk(func(info blobs.Info) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !info.ModTime.Before(cutoff) {
			return nil
		}
		page = append(page, info)
		if len(page) < blobPage {
			return nil
		}
		return collect()
	})
	if err == nil && len(page) > 0 {
		err = collect()
	}
	if err != nil {
		return rep, err
	}
	if err := o.collectPartials(dryRun, cutoff, &rep); err != nil {
		return rep, err
	}
	if dryRun {
		rep.TempRemoved, err = o.Blobs.StaleTemp(cutoff)
	} else {
		rep.TempRemoved, err = o.Blobs.CleanTemp(cutoff)
	}
	return rep, err
}

// collectPartials removes the partial files of transfers the store no
// longer records. The listing is taken first and a file must be older than
// both it and cutoff, so a transfer created meanwhile keeps its file.
func (o *Ops) collectPartials(dryRun bool, cutoff time.Time, rep *GCReport) error {
	listed := time.Now()
	if listed.Before(cutoff) {
		cutoff = listed
	}
	live := map[string]bool{}
	after := ""
	for {
		page, err := o.Store.Transfers(after, blobPage)
		if err != nil {
			return err
		}
		for _, id := range page {
			live[id] = true
		}
		if len(page) < blobPage {
			break
		}
		after = page[len(page)-1]
	}
	stale, err := o.Blobs.StalePartials(cutoff)
	if err != nil {
		return err
	}
	for _, p := range stale {
		if live[p.ID] {
			continue
		}
		if !dryRun {
			if err := o.Blobs.RemovePartial(p.ID); err != nil {
				return err
			}
		}
		rep.PartialsRemoved++
		rep.PartialBytes += p.Size
	}
	return nil
}
