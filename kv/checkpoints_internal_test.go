package kv

import (
	"bytes"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// TestCosignatures: cosignatures gather on the newest signed checkpoint;
// it becomes the witnessed one when the quorum is reached, and its signed
// note carries the lines after the log's own in the order of the witnesses'
// keys. A cosignature of an older checkpoint updates its witness only; a
// cosignature clears the witness's conflict.
func TestCosignatures(t *testing.T) {
	s := logStore(t, 5)
	small, err := s.LastCheckpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateWitnessState("w/b", func(st *WitnessState) {
		st.Conflict, st.Refusals = "it saw another tree", map[string]uint64{"conflict": 1}
	}); err != nil {
		t.Fatal(err)
	}
	if done, err := s.AddCosignature(small, "w/b", []byte("— b sig\n"), 2); err != nil || done {
		t.Fatalf("one of two cosignatures: witnessed %v, %v", done, err)
	}
	latest, witnessed, err := s.Checkpoints()
	if err != nil || witnessed != nil || latest.Size != 5 || len(latest.Cosignatures) != 1 {
		t.Fatalf("after one cosignature: latest %+v, witnessed %+v, %v", latest, witnessed, err)
	}
	if done, err := s.AddCosignature(small, "w/a", []byte("— a sig\n"), 2); err != nil || !done {
		t.Fatalf("two of two cosignatures: witnessed %v, %v", done, err)
	}
	_, witnessed, _ = s.Checkpoints()
	if want := "signed— a sig\n— b sig\n"; witnessed == nil || string(witnessed.SignedNote()) != want {
		t.Fatalf("witnessed note %q, want %q", witnessed.SignedNote(), want)
	}
	states, err := s.WitnessStates()
	if err != nil || states["w/b"].Conflict != "" || states["w/b"].Size != 5 || states["w/b"].Refusals["conflict"] != 1 {
		t.Fatalf("witness w/b: %+v, %v", states["w/b"], err)
	}

	// The log grows and a newer checkpoint is signed.
	if err := s.PublishDirectory("acct-new", &Directory{Version: 1, Bytes: []byte("d"), IdentityKey: []byte("k")}, PublishLimit{}); err != nil {
		t.Fatal(err)
	}
	tree, _ := s.LogTree()
	large, err := s.SaveCheckpoint(&LogCheckpoint{Size: tree.N, Root: tree.Hash, Note: []byte("signed 6")})
	if err != nil {
		t.Fatal(err)
	}
	latest, witnessed, _ = s.Checkpoints()
	if latest.Size != 6 || len(latest.Cosignatures) != 0 || witnessed.Size != 5 {
		t.Fatalf("a new checkpoint: latest %d with %d cosignatures, witnessed %d", latest.Size, len(latest.Cosignatures), witnessed.Size)
	}
	if _, err := s.AddCosignature(large, "w/a", []byte("— a sig 6\n"), 2); err != nil {
		t.Fatal(err)
	}
	if done, err := s.AddCosignature(small, "w/c", []byte("— c late\n"), 2); err != nil || done {
		t.Fatalf("a late cosignature of the older checkpoint: witnessed %v, %v", done, err)
	}
	latest, witnessed, _ = s.Checkpoints()
	if !bytes.Equal(latest.SignedNote(), []byte("signed 6— a sig 6\n")) || witnessed.Size != 5 {
		t.Fatalf("latest %q, witnessed %d", latest.SignedNote(), witnessed.Size)
	}
	if states, _ := s.WitnessStates(); states["w/c"].Size != 5 {
		t.Fatalf("the late witness's state: %+v", states["w/c"])
	}
}

// TestLogTreeProof: the proof that the log extends an older size checks
// with x/mod's tlog; from 0 or from the size itself it is empty; a size
// past the log is refused.
func TestLogTreeProof(t *testing.T) {
	s := logStore(t, 300)
	tree, _ := s.LogTree()
	var old tlog.Hash
	if err := s.view(func(tx Tx) (err error) {
		old, err = tlog.TreeHash(7, txHashes{tx.Bucket(bucketLog)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	proof, err := s.LogTreeProof(tree.N, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(proof, tree.N, tree.Hash, 7, old); err != nil {
		t.Fatalf("the proof from 7 to %d: %v", tree.N, err)
	}
	for _, from := range []int64{0, tree.N} {
		if p, err := s.LogTreeProof(tree.N, from); err != nil || len(p) != 0 {
			t.Fatalf("from %d: %d hashes, %v", from, len(p), err)
		}
	}
	for _, bad := range [][2]int64{{tree.N + 1, 1}, {10, 11}, {10, -1}} {
		if _, err := s.LogTreeProof(bad[0], bad[1]); err == nil {
			t.Fatalf("a proof from %d to %d was given", bad[1], bad[0])
		}
	}
}
