package transfer

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestPassesOneAtATime: concurrent callers never run two passes at once,
// each returns only after a pass that started after its call has ended, and
// callers that come during a pass share the next one.
func TestPassesOneAtATime(t *testing.T) {
	var p passes
	var running, most, count atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	pass := func() {
		n := running.Add(1)
		defer running.Add(-1)
		if n > most.Load() {
			most.Store(n)
		}
		if count.Add(1) == 1 {
			close(entered)
			<-release // the callers below come while the first pass runs
		}
	}
	var first sync.WaitGroup
	first.Go(func() { p.run(pass) })
	<-entered
	const callers = 16
	var calls sync.WaitGroup
	calls.Add(callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			calls.Done()
			before := count.Load()
			p.run(pass)
			if count.Load() <= before {
				t.Error("a caller returned without a pass that started after its call")
			}
		})
	}
	calls.Wait()
	close(release)
	first.Wait()
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d passes ran at once", most.Load())
	}
	if n := count.Load(); n < 2 || n > 1+callers {
		t.Errorf("%d passes for 1 + %d callers", n, callers)
	}
	t.Logf("%d passes for 1 + %d callers", count.Load(), callers)
}
