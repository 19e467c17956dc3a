package postgres

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/kv/bolt"
	"sealbox/kv/engine"
)

// batchRig is a batcher over a real bbolt engine whose updates it counts.
func batchRig(t *testing.T) (*batcher, engine.Engine, *atomic.Int64) {
	t.Helper()
	e, err := bolt.Open(filepath.Join(t.TempDir(), "batch.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateBuckets([][]byte{[]byte("b")}); err != nil {
		t.Fatal(err)
	}
	var updates atomic.Int64
	b := &batcher{
		update: func(fn func(engine.Tx) error) error {
			updates.Add(1)
			return e.Update(fn)
		},
		maxSize: 64, maxDelay: 5 * time.Millisecond,
	}
	return b, e, &updates
}

// TestBatcherSharesTransactions: concurrent callers commit in fewer
// transactions than there are callers, and each one's write is there.
func TestBatcherSharesTransactions(t *testing.T) {
	b, e, updates := batchRig(t)
	const n = 100
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := b.Batch(func(tx engine.Tx) error { return tx.Bucket([]byte("b")).Put(fmt.Appendf(nil, "k%03d", i), []byte("v")) })
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := updates.Load(); got >= n {
		t.Fatalf("%d callers used %d transactions: nothing was batched", n, got)
	}
	var keys int
	e.View(func(tx engine.Tx) error {
		return tx.Bucket([]byte("b")).Scan(engine.Range{Limit: 1000}, func(_, _ []byte) error { keys++; return nil })
	})
	if keys != n {
		t.Fatalf("%d keys written, want %d", keys, n)
	}
}

// TestBatcherFailureStaysWithItsCaller: a function that fails gets its own
// error (after running alone), writes nothing, and the others commit; a
// panic is raised in the panicking caller's goroutine, not the batch's.
func TestBatcherFailureStaysWithItsCaller(t *testing.T) {
	b, e, _ := batchRig(t)
	refused := errors.New("refused")
	var wg sync.WaitGroup
	results := make([]any, 10)
	for i := range 10 {
		wg.Go(func() {
			defer func() {
				if p := recover(); p != nil {
					results[i] = p
				}
			}()
			err := b.Batch(func(tx engine.Tx) error {
				if err := tx.Bucket([]byte("b")).Put(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
					return err
				}
				switch i {
				case 3:
					return refused
				case 7:
					panic("boom")
				}
				return nil
			})
			results[i] = err
		})
	}
	wg.Wait()
	for i, r := range results {
		switch {
		case i == 3 && !errors.Is(asError(r), refused):
			t.Errorf("caller 3 got %v, want its own refusal", r)
		case i == 7 && r != "boom":
			t.Errorf("caller 7 got %v, want its own panic", r)
		case i != 3 && i != 7 && r != nil:
			t.Errorf("caller %d got %v", i, r)
		}
	}
	e.View(func(tx engine.Tx) error {
		for i := range 10 {
			v, _ := tx.Bucket([]byte("b")).Get(fmt.Appendf(nil, "k%d", i))
			if (v != nil) != (i != 3 && i != 7) {
				t.Errorf("key %d written: %v", i, v != nil)
			}
		}
		return nil
	})
}

func asError(v any) error {
	err, _ := v.(error)
	return err
}

// prefetchLog is a Tx that records its Prefetches and the functions run in
// it, in order, for TestBatcherReadsCallersKeysTogether.
type prefetchLog struct {
	engine.Tx
	mu     *sync.Mutex
	events *[]string
}

func (p prefetchLog) Prefetch(keys []engine.Key) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	event := "prefetch"
	for _, k := range keys {
		event += " " + string(k.Key)
	}
	*p.events = append(*p.events, event)
	return nil
}

// TestBatcherReadsCallersKeysTogether: a batch transaction prefetches once,
// before any of its functions runs, the keys of exactly the calls it runs
// (some run several); every caller's keys are read so.
func TestBatcherReadsCallersKeysTogether(t *testing.T) {
	b, _, _ := batchRig(t)
	var mu sync.Mutex
	var events []string
	update := b.update
	b.update = func(fn func(engine.Tx) error) error {
		return update(func(tx engine.Tx) error {
			mu.Lock()
			events = append(events, "begin")
			mu.Unlock()
			return fn(prefetchLog{Tx: tx, mu: &mu, events: &events})
		})
	}
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key := fmt.Sprintf("k%02d", i)
			err := b.BatchReading([]engine.Key{{Bucket: []byte("b"), Key: []byte(key)}}, func(tx engine.Tx) error {
				mu.Lock()
				events = append(events, "run "+key)
				mu.Unlock()
				return tx.Bucket([]byte("b")).Put([]byte(key), []byte("v"))
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	ran, batched := 0, false
	var prefetched map[string]bool
	for i, ev := range events {
		switch {
		case ev == "begin":
			if i+1 == len(events) || !strings.HasPrefix(events[i+1], "prefetch ") {
				t.Fatalf("a transaction did not prefetch before its functions: %q", events)
			}
		case strings.HasPrefix(ev, "prefetch "):
			if events[i-1] != "begin" {
				t.Fatalf("a transaction prefetched more than once: %q", events)
			}
			batched = batched || len(strings.Fields(ev)) > 2
			prefetched = map[string]bool{}
			for _, k := range strings.Fields(ev)[1:] {
				prefetched[k] = true
			}
		case !prefetched[strings.TrimPrefix(ev, "run ")]:
			t.Fatalf("%s ran in a transaction that did not prefetch its key: %q", ev, events)
		default:
			delete(prefetched, strings.TrimPrefix(ev, "run "))
			ran++
		}
		if i+1 == len(events) || events[i+1] == "begin" {
			if len(prefetched) != 0 {
				t.Fatalf("a transaction prefetched keys of calls it did not run: %v", prefetched)
			}
		}
	}
	if ran != n {
		t.Fatalf("%d functions ran, want %d", ran, n)
	}
	if !batched {
		t.Fatalf("no transaction read the keys of two calls: %q", events)
	}
}
