// Package durable makes written files survive a crash: Close ends a write
// with an fsync before the close, and SyncDir makes the names created in a
// directory durable. Every writer of a file that must outlive a power cut
// (the blob stores, a compacted store, a backup, a key, client state) ends
// through it, so the order "fsync, then close, and report the first error"
// is written once. It sits under kv, the lowest layer of the fixed top
// level, as lru does; it imports nothing of the project.
package durable

import "os"

// A File is what Close ends: an *os.File, or an engine file such as a bbolt
// database written without its own fsyncs.
type File interface {
	Sync() error
	Close() error
}

// Close ends the write of f whose outcome is err: when err is nil, f is
// fsynced first; f is closed in every case; the first error of the three is
// returned. A nil return means f's bytes are on stable storage; its name is
// durable only once its directory is synced too (SyncDir).
func Close(f File, err error) error {
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDir fsyncs the directory dir, making the names created, renamed or
// removed in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return Close(d, nil)
}
