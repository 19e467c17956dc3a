package postgres

import (
	"sync"
	"testing"

	"sealbox/kv/engine"
)

// TestConflictsNameTheirStatement: two transactions that read a row and
// both rewrite it conflict; the loser's retry is counted under the
// statement that lost (the write of the row, which finds it changed by
// the winner, or the COMMIT), and under no other.
func TestConflictsNameTheirStatement(t *testing.T) {
	name := []byte("counter")
	e := openTestEngine(t, name)
	bump := func(tx engine.Tx) error {
		v, err := tx.Bucket(name).Get([]byte("n"))
		if err != nil {
			return err
		}
		return tx.Bucket(name).Put([]byte("n"), append(v, 'x'))
	}
	// Both read before either commits, the first time each runs: one of
	// them loses and runs again.
	var read sync.WaitGroup
	read.Add(2)
	var once [2]sync.Once
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			err := e.Update(func(tx engine.Tx) error {
				if _, err := tx.Bucket(name).Get([]byte("n")); err != nil {
					return err
				}
				once[i].Do(func() { read.Done(); read.Wait() })
				return bump(tx)
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	st := e.Stats()
	if st.TxRetries == 0 {
		t.Fatal("no retry: the transactions did not conflict")
	}
	t.Logf("conflicts: %v", st.Conflicts)
	var counted uint64
	for at, n := range st.Conflicts {
		counted += n
		if at != "commit" && at != "write counter" {
			t.Errorf("a conflict counted at %q", at)
		}
	}
	if counted != st.TxRetries {
		t.Errorf("Conflicts %v count %d retries, want TxRetries %d", st.Conflicts, counted, st.TxRetries)
	}
}
