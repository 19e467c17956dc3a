package library

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSyncUnchanged10k is a rerun of sync on an unchanged folder of
// 10,000 photos (issue 35's goal: under 1 s): the walk, a stat of each
// file and a look-up in the index, which a first sync filled as recorded
// here. Nothing is read and nothing reaches a server: the run asks none.
//
//	go test -run '^$' -bench BenchmarkSyncUnchanged10k ./cli/library
func BenchmarkSyncUnchanged10k(b *testing.B) {
	dir := b.TempDir()
	folder := filepath.Join(dir, "Library")
	p, err := OpenProfile(filepath.Join(dir, "profile"))
	if err != nil {
		b.Fatal(err)
	}
	ix, err := p.OpenIndex()
	if err != nil {
		b.Fatal(err)
	}
	defer ix.Close()
	for i := range 10_000 {
		sub := filepath.Join(folder, fmt.Sprintf("%03d", i/100))
		os.MkdirAll(sub, 0o755)
		path := filepath.Join(sub, fmt.Sprintf("IMG_%05d.jpg", i))
		if err := os.WriteFile(path, []byte(fmt.Sprint("photo ", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		st, err := statOf(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := ix.Synced(path, &FileRecord{Size: st.size, ModTime: st.modTime, Inode: st.inode, AlbumID: "album", FileID: fmt.Sprint(i), ContentHMAC: fmt.Sprint(i)}); err != nil {
			b.Fatal(err)
		}
	}
	s := &Syncer{Profile: p, Index: ix, Album: "Library", Jobs: 4, Now: time.Now}
	b.ResetTimer()
	for range b.N {
		sum, err := s.Sync(context.Background(), []string{folder})
		if err != nil || sum.Unchanged != 10_000 {
			b.Fatalf("%+v, %v", sum, err)
		}
	}
}
