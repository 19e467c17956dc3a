package bolt

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// boundMappedEvery is how often the MappedBudget watcher looks at the
// process's resident memory: a scan touches at most a few MiB of pages in
// that time, so the budget is overshot by little.
const boundMappedEvery = 5 * time.Millisecond

// boundMapped starts the watcher of Options.MappedBudget and returns the
// function that stops it and waits for it to end.
func boundMapped(e *Engine, budget int64) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(boundMappedEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if fileResident() > budget {
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
// mapped store file and executable; the third field of /proc/self/statm,
// in pages), or 0 when it cannot be read.
func fileResident() int64 {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := bytes.Fields(statm)
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
