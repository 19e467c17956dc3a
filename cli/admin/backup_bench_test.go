package admin_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"sealbox/cli/admin"
	"sealbox/kv"
)

// backupFixture is a data directory with accounts and blobs of 64 KiB, all
// held by the first account.
func backupFixture(b *testing.B, accounts, blobCount int) *admin.Ops {
	b.Helper()
	ops := dataDirOps(b)
	now := time.Now()
	for start := 0; start < accounts; start += 20_000 {
		err := ops.Store.Bulk(func(bk *kv.Bulk) error {
			for i := start; i < start+20_000 && i < accounts; i++ {
				a := &kv.Account{ID: fmt.Sprintf("%08x-2222-4000-8000-000000000000", i), Email: fmt.Sprintf("b%d@example.org", i), PasswordHash: "x", CreatedAt: now}
				if err := bk.Account(a); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	addBlobs(b, ops, 0, blobCount)
	return ops
}

// addBlobs stores n new 64 KiB blobs numbered from first.
func addBlobs(b *testing.B, ops *admin.Ops, first, n int) {
	b.Helper()
	owner := fmt.Sprintf("%08x-2222-4000-8000-000000000000", 0)
	var held []kv.Blob
	data := make([]byte, 64<<10)
	for i := first; i < first+n; i++ {
		rand.Read(data[8:64])
		binary.BigEndian.PutUint64(data, uint64(i))
		info, _, err := ops.Blobs.Put(bytes.NewReader(data), "", 0)
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, kv.Blob{Hash: info.Hash, Size: info.Size, StoredAt: time.Now()})
	}
	err := ops.Store.Bulk(func(bk *kv.Bulk) error {
		for _, h := range held {
			if err := bk.Hold(owner, h); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBackup: a full backup of 100,000 accounts and 10,000 blobs of
// 64 KiB into an empty folder, and an incremental one into a folder that
// already holds all but 100 new blobs (goal: under 10% of the full one).
func BenchmarkBackup(b *testing.B) {
	ops := backupFixture(b, 100_000, 10_000)
	ctx := context.Background()
	b.Run("full", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := ops.Backup(ctx, filepath.Join(b.TempDir(), "backup"), admin.BackupOptions{}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("incremental-100", func(b *testing.B) {
		dest := filepath.Join(b.TempDir(), "backup")
		if _, err := ops.Backup(ctx, dest, admin.BackupOptions{}, nil); err != nil {
			b.Fatal(err)
		}
		next := 10_000
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			addBlobs(b, ops, next, 100)
			next += 100
			b.StartTimer()
			rep, err := ops.Backup(ctx, dest, admin.BackupOptions{}, nil)
			if err != nil || rep.BlobsCopied != 100 {
				b.Fatalf("copied %d, %v", rep.BlobsCopied, err)
			}
		}
	})
}
