package admin

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/server/ids"
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

// gcLease names the lease a gc run holds in the store, so that of the
// nodes sharing a store one collects at a time; gcLeaseTTL is how long it
// holds without renewal (a run renews it every third of that while it
// walks, and a run that died frees it after at most that long).
const (
	gcLease    = "gc"
	gcLeaseTTL = 2 * time.Minute
)

// ErrGCRunning refuses a gc while another one, on any node sharing the
// store, holds the gc lease.
var ErrGCRunning = errors.New("another gc is running on this store")

// claimGC takes the gc lease for this run; it renews itself until released.
func (o *Ops) claimGC() (*kv.Lease, error) {
	src := o.Rand
	if src == nil {
		src = rand.Reader
	}
	lease, err := o.Store.TakeLease(gcLease, "gc/"+ids.UUID(src), gcLeaseTTL)
	if held := (*kv.LeaseHeldError)(nil); errors.As(err, &held) {
		return nil, fmt.Errorf("%w (its lease, %s, lasts until %s unless renewed): wait for it to finish; a gc that died frees it by then",
			ErrGCRunning, held.Holder, held.Until.UTC().Format(time.RFC3339))
	}
	return lease, err
}

// gcLost is the error of a run whose lease passed to another: it stops.
func gcLost(err error) error {
	if errors.Is(err, kv.ErrLeaseLost) {
		return fmt.Errorf("%w: this run's lease lapsed and another took it, so this one stops", ErrGCRunning)
	}
	return err
}

// GC deletes expired records, partial files of transfers that no longer
// exist, and blob files that no account holds and
// that are older than grace: an upload writes its file before it records
// the holding, and a blob younger than grace may be such an upload in
// progress. blobs.Collect keeps a file that an upload of the same bytes
// claimed meanwhile. With dryRun nothing is removed and the report says what
// would be.
//
// A run that removes holds the gc lease in the store, so it refuses to start
// (ErrGCRunning) while a gc on any node sharing the store runs; a dry run
// removes nothing and takes no lease.
func (o *Ops) GC(ctx context.Context, dryRun bool, grace time.Duration) (rep GCReport, err error) {
	rep = GCReport{DryRun: dryRun}
	// held says whether the run still holds its lease, without waiting:
	// the walk asks it at every blob.
	held, confirm := func() error { return nil }, func() error { return nil }
	if !dryRun {
		lease, err := o.claimGC()
		if err != nil {
			return rep, err
		}
		defer func() {
			if rerr := lease.Release(); err == nil {
				err = rerr
			}
		}()
		held = func() error {
			select {
			case <-lease.Lost():
				return gcLost(kv.ErrLeaseLost)
			default:
				return nil
			}
		}
		confirm = func() error { return gcLost(lease.Confirm()) }
	}
	// File times are wall-clock facts, so the cutoff is too.
	cutoff := time.Now().Add(-grace)
	if dryRun {
		rep.RecordsSwept, err = o.Store.DueExpiries()
	} else {
		rep.RecordsSwept, err = o.Store.Sweep()
	}
	if err != nil {
		return rep, err
	}
	if err := o.collectUnrecorded(ctx, dryRun, cutoff, held, &rep); err != nil {
		return rep, err
	}
	if err := confirm(); err != nil {
		return rep, err
	}
	if err := o.collectPartials(dryRun, cutoff, &rep); err != nil {
		return rep, err
	}
	temp, ok := o.Blobs.(blobs.TempCleaner)
	switch {
	case !ok:
	case dryRun:
		rep.TempRemoved, err = temp.StaleTemp(cutoff)
	default:
		rep.TempRemoved, err = temp.CleanTemp(cutoff)
	}
	return rep, err
}

// collectUnrecorded walks the blob store and removes (in a dry run, counts)
// every blob older than cutoff that the store does not record. Candidates
// are checked against the store a page at a time, one read transaction per
// page, as the walk lists them; held stops the walk once gc's lease is lost.
func (o *Ops) collectUnrecorded(ctx context.Context, dryRun bool, cutoff time.Time, held func() error, rep *GCReport) error {
	page := make([]blobs.Info, 0, blobPage)
	err := o.Blobs.Walk(func(info blobs.Info) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := held(); err != nil {
			return err
		}
		if !info.ModTime.Before(cutoff) {
			return nil
		}
		page = append(page, info)
		if len(page) < blobPage {
			return nil
		}
		err := o.collectPage(page, dryRun, cutoff, rep)
		page = page[:0]
		return err
	})
	if err == nil && len(page) > 0 {
		err = o.collectPage(page, dryRun, cutoff, rep)
	}
	return err
}

// collectPage removes (in a dry run, counts) the blobs of page that the
// store does not record. A blob gone since the walk listed it is skipped,
// and Collect keeps one that a put claimed meanwhile.
func (o *Ops) collectPage(page []blobs.Info, dryRun bool, cutoff time.Time, rep *GCReport) error {
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
	return nil
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
