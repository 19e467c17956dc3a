package blobs

import (
	"os"
	"sync"
	"sync/atomic"
)

// groupCommit lets concurrent PutSmall calls share the flushes that make
// small blobs durable. A Put pays for its own file fsync and directory
// fsyncs, three or more disk flushes for a few hundred bytes; a group of
// small blobs instead pays for two flushes of the whole filesystem (see
// syncFS), one for the bytes and one for the names, however many blobs it
// holds.
//
// There is no background goroutine: the first caller to find no group
// running leads one, and when its group is done it hands the lead to the
// first caller that arrived meanwhile, whose blobs form the next group.
type groupCommit struct {
	// callers counts the PutSmall calls under way. A lone call puts its
	// blobs as Put does: a flush of the whole filesystem costs more than
	// the few fsyncs of one file, and pays only for a group.
	callers atomic.Int64

	mu      sync.Mutex
	pending []*smallPut
	leading bool
}

// smallPut is one PutSmall call waiting in a group.
type smallPut struct {
	temps  []string // its blobs' temp files, written but not yet flushed
	hashes []string
	sizes  []int64
	err    error
	// done receives true when the call is to lead the next group, false
	// when a leader has finished the call's blobs.
	done chan bool
}

// PutSmall is Engine.PutSmall, each blob stored as PutBytes does:
// concurrent calls share their flushes, and none is half-written since a
// blob gets its name only after its bytes are on disk.
func (s *Dir) PutSmall(bs ...[]byte) error {
	if len(bs) == 0 {
		return nil
	}
	g := &s.group
	defer g.callers.Add(-1)
	if g.callers.Add(1) == 1 || !haveSyncFS {
		return s.putEach(bs)
	}
	p := &smallPut{done: make(chan bool, 1)}
	// Every name in s.tmp is a leftover once its blob is linked or the call
	// failed; CleanTemp collects what a crash leaves.
	defer func() {
		for _, name := range p.temps {
			os.Remove(name)
		}
	}()
	for _, b := range bs {
		name, err := s.writeTemp(b)
		if err != nil {
			return err
		}
		p.temps = append(p.temps, name)
		hash := AddressOf(b)
		p.hashes = append(p.hashes, hash)
		p.sizes = append(p.sizes, int64(len(b)))
		// Creating a directory can wait on a disk read (about a millisecond
		// here) and a young store makes one for most blobs: done by each
		// caller, those waits overlap instead of adding up in the leader.
		// The group's second flush makes the new entries durable.
		if err := s.ensureDirs(hash, false); err != nil {
			return err
		}
	}

	g.mu.Lock()
	g.pending = append(g.pending, p)
	lead := !g.leading
	g.leading = true
	g.mu.Unlock()
	if !lead {
		lead = <-p.done
	}
	if lead {
		s.leadGroup(p)
	}
	return p.err
}

// putEach puts bs side by side, each with its own fsyncs, which overlap on
// the disk.
func (s *Dir) putEach(bs [][]byte) error {
	errs := make(chan error, len(bs))
	for _, b := range bs[1:] {
		go func() {
			_, _, err := s.PutBytes(b)
			errs <- err
		}()
	}
	_, _, err := s.PutBytes(bs[0])
	for range bs[1:] {
		if e := <-errs; err == nil {
			err = e
		}
	}
	return err
}

// writeTemp writes b to a new file in s.tmp without flushing it.
func (s *Dir) writeTemp(b []byte) (string, error) {
	f, err := os.CreateTemp(s.tmp, "small-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// leadGroup takes every waiting call as one group and makes its blobs
// durable: one flush for the bytes written so far, the links (or claims of
// blobs already stored), one flush for the names. Then it releases the
// group's calls and hands the lead on, or gives it up when none waits.
// leader, the caller's own call, is in the group it leads.
func (s *Dir) leadGroup(leader *smallPut) {
	g := &s.group
	g.mu.Lock()
	group := g.pending
	g.pending = nil
	g.mu.Unlock()

	err := syncFS(s.tmp)
	for _, p := range group {
		p.err = err
		for i := 0; p.err == nil && i < len(p.temps); i++ {
			_, _, p.err = s.link(p.temps[i], p.hashes[i], p.sizes[i], func() error { return nil }, false)
		}
	}
	// Even a call whose blobs were all stored before needs this flush: a
	// concurrent Put may have linked one and not yet made its name durable.
	if err := syncFS(s.tmp); err != nil {
		for _, p := range group {
			if p.err == nil {
				p.err = err
			}
		}
	}

	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].done <- true
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	for _, p := range group {
		if p != leader {
			p.done <- false
		}
	}
}
