package bolt

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// boundMappedEvery is how often the MappedBudget watcher looks at the
// process's resident memory. bbolt's page check maps pages faster than a
// disk reads them (the kernel maps the cached pages around each fault), so
// the watcher looks often to overshoot the budget by little; a look is one
// read of /proc/self/statm.
const boundMappedEvery = time.Millisecond

// boundMapped starts the watcher of Options.MappedBudget and returns the
// function that stops it and waits for it to end. Without
// /proc/self/statm there is no watcher.
func boundMapped(e *Engine, budget int64) (stop func()) {
	statm, err := os.Open("/proc/self/statm")
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer statm.Close()
		tick := time.NewTicker(boundMappedEvery)
		defer tick.Stop()
		buf := make([]byte, 128)
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if fileResident(statm, buf) > budget {
					e.releaseMapped()
				}
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// fileResident is the process's resident memory backed by files (its
// mapped store file and executable): the third field of statm, in pages.
// It is 0 when statm cannot be read.
func fileResident(statm *os.File, buf []byte) int64 {
	n, err := statm.ReadAt(buf, 0)
	if n == 0 || err != nil && !errors.Is(err, io.EOF) {
		return 0
	}
	fields := bytes.Fields(buf[:n])
	if len(fields) < 3 {
		return 0
	}
	pages, err := strconv.ParseInt(string(fields[2]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// releaseMapped drops every mapped page of the file from the process's
// resident memory (madvise MADV_DONTNEED). For bbolt's shared read-only
// map of its file that is safe at any time: the pages stay in the page
// cache and a later read faults them back in. It runs inside a read
// transaction, which holds bbolt's map lock, so no writer can remap the
// file meanwhile and the range is the file's map and nothing else.
func (e *Engine) releaseMapped() {
	e.db.View(func(tx *bolt.Tx) error {
		syscall.Syscall(syscall.SYS_MADVISE, e.db.Info().Data, uintptr(tx.Size()), syscall.MADV_DONTNEED)
		return nil
	})
}
