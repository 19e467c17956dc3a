package witness_test

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/rs/zerolog"
	"golang.org/x/mod/sumdb/note"

	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/server/witness"
)

// fakeWitness is a witness over httptest, for the answers a real one never
// gives (a size beyond the log, a redirect) and for a slow one. It follows
// C2SP tlog-witness as far as the worker needs: a request whose old size is
// not the one it holds gets a 409 naming it; any other is cosigned, and
// moves it to the checkpoint's size (it checks no proof). While canned
// holds answers, it gives the first of them instead.
type fakeWitness struct {
	*httptest.Server
	signer *torchwood.CosignatureSigner

	mu       sync.Mutex
	size     int64
	requests int
	canned   []func(http.ResponseWriter)
	// hold, when set, is waited on before a request is answered.
	hold chan struct{}
}

func newFakeWitness(t *testing.T, name string) *fakeWitness {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := torchwood.NewCosignatureSigner(name, priv)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeWitness{signer: signer}
	f.Server = httptest.NewServer(http.HandlerFunc(f.addCheckpoint))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeWitness) addCheckpoint(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.canned) > 0 {
		answer := f.canned[0]
		f.canned = f.canned[1:]
		answer(w)
		return
	}
	br := bufio.NewReader(r.Body)
	first, _ := br.ReadString('\n')
	old, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(first, "old "), "\n"), 10, 64)
	if err != nil {
		http.Error(w, "no old size", http.StatusBadRequest)
		return
	}
	for line, _ := br.ReadString('\n'); line != "\n"; line, _ = br.ReadString('\n') {
		if line == "" {
			http.Error(w, "no checkpoint", http.StatusBadRequest)
			return
		}
	}
	if old != f.size {
		w.Header().Set("Content-Type", "text/x.tlog.size")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, "%d\n", f.size)
		return
	}
	var signed bytes.Buffer
	signed.ReadFrom(br)
	text, _, _ := bytes.Cut(signed.Bytes(), []byte("\n\n"))
	lines := strings.Split(string(text), "\n")
	size, _ := strconv.ParseInt(lines[1], 10, 64)
	cosigned, err := note.Sign(&note.Note{Text: string(text) + "\n"}, f.signer)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	f.size = size
	_, sig, _ := bytes.Cut(cosigned, []byte("\n\n"))
	w.Write(sig)
}

// answer makes the witness give these answers to its next requests.
func (f *fakeWitness) answer(answers ...func(http.ResponseWriter)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.canned = append(f.canned, answers...)
}

func (f *fakeWitness) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// spec is the witness as --witness takes it, at url (its own by default).
func (f *fakeWitness) parse(t *testing.T, url string) witness.Witness {
	t.Helper()
	if url == "" {
		url = f.URL
	}
	w, err := witness.Parse(f.signer.Verifier().String() + "=" + url)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func sizeAnswer(size string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/x.tlog.size")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, "%s\n", size)
	}
}

// witnessedStore is a store whose log holds n records.
func witnessedStore(t *testing.T, n int) (*kv.Store, *kvtest.Clock, func(int)) {
	t.Helper()
	s, clock := kvtest.MustOpenStore(t)
	version := uint64(0)
	grow := func(n int) {
		t.Helper()
		for range n {
			version++
			if err := s.PublishDirectory("acct-1", &kv.Directory{Version: version, Bytes: []byte("d"), IdentityKey: []byte("k")}, kv.PublishLimit{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	grow(n)
	return s, clock, grow
}

// round has the worker work one round and waits for its submissions.
func round(t *testing.T, w *witness.Worker) {
	t.Helper()
	if !w.Round(t.Context()) {
		t.Fatal("the worker did not hold the lease")
	}
	w.Wait()
}

func state(t *testing.T, s *kv.Store, wit witness.Witness) kv.WitnessState {
	t.Helper()
	states, err := s.WitnessStates()
	if err != nil {
		t.Fatal(err)
	}
	return states[wit.VerifierKey]
}

func witnessedSize(t *testing.T, s *kv.Store) int64 {
	t.Helper()
	_, witnessed, err := s.Checkpoints()
	if err != nil {
		t.Fatal(err)
	}
	if witnessed == nil {
		return 0
	}
	return witnessed.Size
}

// TestWitnessSizeBeyondTheLogIsAFault: a witness that once names a tree
// size beyond the log (9·10^18) is a faulty witness, not a split view: the
// fault is counted and kept for /readyz, the size is not believed, the
// witness is asked again after a backoff that doubles with each wrong
// answer, and once it answers right it cosigns the log as it grew and the
// fault ends.
func TestWitnessSizeBeyondTheLogIsAFault(t *testing.T) {
	s, clock, grow := witnessedStore(t, 1)
	f := newFakeWitness(t, "witness.example/fault")
	wit := f.parse(t, "")
	const interval = time.Minute
	w := witness.New(s, newLog(t, s), witness.Options{Witnesses: []witness.Witness{wit}, Quorum: 1, Interval: interval, Now: clock.Now})
	f.answer(sizeAnswer("9000000000000000000"))
	round(t, w)
	st := state(t, s, wit)
	if st.Conflict != "" || !strings.Contains(st.Fault, "claims 9000000000000000000 records of this log, which holds 1") ||
		st.Refusals[witness.ReasonFault] != 1 || st.Refusals[witness.ReasonConflict] != 0 || st.Size != 0 {
		t.Fatalf("after a size beyond the log: %+v", st)
	}
	grow(6)
	// Within the backoff the witness is not asked.
	clock.Advance(interval - time.Second)
	round(t, w)
	if got := f.requestCount(); got != 1 {
		t.Fatalf("requests within the backoff: %d, want 1", got)
	}
	// Once it has passed, it is; a second wrong answer doubles the wait.
	f.answer(sizeAnswer("9000000000000000000"))
	clock.Advance(time.Second)
	round(t, w)
	if got := f.requestCount(); got != 2 {
		t.Fatalf("requests after the backoff: %d, want 2", got)
	}
	clock.Advance(2*interval - time.Second)
	round(t, w)
	if got := f.requestCount(); got != 2 {
		t.Fatalf("requests within the doubled backoff: %d, want 2", got)
	}
	clock.Advance(time.Second)
	round(t, w)
	st = state(t, s, wit)
	if st.Fault != "" || st.Conflict != "" || st.Size != 7 || st.Refusals[witness.ReasonFault] != 2 {
		t.Fatalf("after the witness answered right: %+v", st)
	}
	if got := witnessedSize(t, s); got != 7 {
		t.Fatalf("witnessed checkpoint: size %d, want 7", got)
	}
}

// TestWitnessStuckStateOfAnEarlierRelease: a store where an earlier release
// kept a witness's size beyond the log as a conflict (and so never asked it
// again, restart or not) asks it again from size 0, and its cosignature
// ends the conflict.
func TestWitnessStuckStateOfAnEarlierRelease(t *testing.T) {
	s, clock, _ := witnessedStore(t, 7)
	f := newFakeWitness(t, "witness.example/stuck")
	wit := f.parse(t, "")
	if err := s.UpdateWitnessState(wit.VerifierKey, func(st *kv.WitnessState) {
		st.Size, st.Conflict = 9_000_000_000_000_000_000, "the witness has seen 9000000000000000000 records of this log, which now holds 1"
	}); err != nil {
		t.Fatal(err)
	}
	w := witness.New(s, newLog(t, s), witness.Options{Witnesses: []witness.Witness{wit}, Quorum: 1, Interval: time.Minute, Now: clock.Now})
	round(t, w)
	if st := state(t, s, wit); st.Conflict != "" || st.Size != 7 || f.requestCount() != 1 {
		t.Fatalf("after a round: %+v, %d requests", st, f.requestCount())
	}
	if got := witnessedSize(t, s); got != 7 {
		t.Fatalf("witnessed checkpoint: size %d, want 7", got)
	}
}

// TestWitnessAnotherTreeStaysAConflict: a witness that refuses the proof
// from a size the log holds (422) saw another tree there: a conflict, not a
// fault, and not backed off.
func TestWitnessAnotherTreeStaysAConflict(t *testing.T) {
	s, clock, _ := witnessedStore(t, 3)
	f := newFakeWitness(t, "witness.example/fork")
	wit := f.parse(t, "")
	w := witness.New(s, newLog(t, s), witness.Options{Witnesses: []witness.Witness{wit}, Quorum: 1, Interval: time.Minute, Now: clock.Now})
	unprocessable := func(w http.ResponseWriter) { http.Error(w, "inconsistent", http.StatusUnprocessableEntity) }
	f.answer(sizeAnswer("2"), unprocessable)
	round(t, w)
	st := state(t, s, wit)
	if !strings.Contains(st.Conflict, "it saw another tree at that size") || st.Fault != "" || st.Refusals[witness.ReasonConflict] != 1 || st.Size != 2 {
		t.Fatalf("after a 422: %+v", st)
	}
	f.answer(unprocessable)
	round(t, w) // the next round asks again at once
	if got := f.requestCount(); got != 3 {
		t.Fatalf("requests: %d, want 3", got)
	}
}

// TestWitnessRedirectIsNotFollowed: a witness answering 307 or 302 is not
// followed (neither the POST re-sent nor a GET made to where it points): it
// is a wrong answer naming the witness, counted and kept as a fault.
func TestWitnessRedirectIsNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusFound, http.StatusPermanentRedirect, http.StatusMovedPermanently} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			target := newFakeWitness(t, "witness.example/target")
			s, clock, _ := witnessedStore(t, 1)
			f := newFakeWitness(t, "witness.example/redirecting")
			wit := f.parse(t, "")
			f.answer(func(w http.ResponseWriter) {
				w.Header().Set("Location", target.URL+"/add-checkpoint")
				w.WriteHeader(status)
			})
			var logs bytes.Buffer
			w := witness.New(s, newLog(t, s), witness.Options{Witnesses: []witness.Witness{wit}, Quorum: 1, Interval: time.Minute, Now: clock.Now, Log: zerolog.New(zerolog.SyncWriter(&logs))})
			round(t, w)
			if got := target.requestCount(); got != 0 {
				t.Fatalf("the redirect was followed: %d requests to its target", got)
			}
			st := state(t, s, wit)
			if !strings.Contains(st.Fault, "answered a redirect ("+strconv.Itoa(status)+")") || st.Refusals[witness.ReasonRedirect] != 1 {
				t.Fatalf("after a redirect: %+v", st)
			}
			if line := logs.String(); !strings.Contains(line, `"witness":"witness.example/redirecting"`) || !strings.Contains(line, `"reason":"redirect"`) {
				t.Fatalf("log: %s", line)
			}
		})
	}
}

// TestWitnessURLCredentialsNotLogged: a witness URL's user name and
// password appear in no log line, whether the witness answers or not.
func TestWitnessURLCredentialsNotLogged(t *testing.T) {
	s, clock, _ := witnessedStore(t, 1)
	f := newFakeWitness(t, "witness.example/private")
	withCreds := strings.Replace(f.URL, "http://", "http://alice:s3cret@", 1)
	down := newFakeWitness(t, "witness.example/down")
	down.Close()
	wits := []witness.Witness{f.parse(t, withCreds), down.parse(t, strings.Replace(down.URL, "http://", "http://bob:hunter2@", 1))}
	f.answer(func(w http.ResponseWriter) { http.Error(w, "nope", http.StatusNotFound) })
	var logs bytes.Buffer
	w := witness.New(s, newLog(t, s), witness.Options{Witnesses: wits, Quorum: 1, Interval: time.Minute, Now: clock.Now, Log: zerolog.New(zerolog.SyncWriter(&logs))})
	round(t, w)
	got := logs.String()
	if !strings.Contains(got, `"reason":"not_found"`) || !strings.Contains(got, `"reason":"unreachable"`) || !strings.Contains(got, "xxxxx@") {
		t.Fatalf("log: %s", got)
	}
	for _, secret := range []string{"alice", "s3cret", "bob", "hunter2"} {
		if strings.Contains(got, secret) {
			t.Errorf("the log holds %q: %s", secret, got)
		}
	}
	if _, err := witness.Parse(wits[0].VerifierKey + "=ftp://alice:s3cret@host"); err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
		t.Fatalf("refusing a URL: %v", err)
	}
}

// TestWitnessSlowOneDelaysOnlyItself: while one witness takes its time to
// answer, a round returns at once, the other witness cosigns, and the slow
// one is not asked again before it answers.
func TestWitnessSlowOneDelaysOnlyItself(t *testing.T) {
	s, clock, grow := witnessedStore(t, 1)
	slow, fast := newFakeWitness(t, "witness.example/slow"), newFakeWitness(t, "witness.example/fast")
	release := make(chan struct{})
	slow.hold = release
	released := sync.OnceFunc(func() { close(release) })
	wits := []witness.Witness{slow.parse(t, ""), fast.parse(t, "")}
	w := witness.New(s, newLog(t, s), witness.Options{Witnesses: wits, Quorum: 1, Interval: time.Minute, Now: clock.Now})
	t.Cleanup(w.Wait)
	t.Cleanup(released) // runs before Wait
	roundReturns := func() {
		t.Helper()
		done := make(chan bool)
		go func() { done <- w.Round(t.Context()) }()
		select {
		case held := <-done:
			if !held {
				t.Fatal("the worker did not hold the lease")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a round waited for the slow witness")
		}
	}
	roundReturns()
	for deadline := time.Now().Add(5 * time.Second); witnessedSize(t, s) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fast witness did not cosign while the slow one was answering")
		}
	}
	grow(1)
	clock.Advance(time.Minute)
	roundReturns()
	for deadline := time.Now().Add(5 * time.Second); witnessedSize(t, s) != 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the fast witness did not cosign the second checkpoint")
		}
	}
	if got := slow.requestCount(); got != 1 {
		t.Fatalf("requests to the slow witness while it answered its first: %d, want 1", got)
	}
	released()
	w.Wait()
	if st := state(t, s, wits[0]); st.Size != 1 {
		t.Fatalf("the slow witness, once it answered: %+v", st)
	}
}
