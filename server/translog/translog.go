// Package translog is the transparency log of directory publishes as its
// signer sees it: it holds the log's key, signs checkpoints of the tree the
// store holds, and hands out the exact bytes a client is served (the shape
// of x/mod/sumdb's ServerOps), so the HTTP handlers only parse paths and
// serve bytes and no handler signs, picks or composes a checkpoint
// (server/PROTOCOL.md §16). It imports no HTTP: the witness worker, serve's
// start and the handlers share one Log.
package translog

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"sealbox/kv"
)

// Key signs the log's checkpoints. The signer's name is the log's origin,
// the first line of every checkpoint.
type Key struct {
	Signer note.Signer
	// VerifierKey is the signer's public key in the note verifier form,
	// <name>+<hash>+<key>, as clients configure it.
	VerifierKey string
}

// NewKey makes a fresh key whose origin is origin, with randomness from
// rand.
func NewKey(rand io.Reader, origin string) (Key, error) {
	skey, vkey, err := note.GenerateKey(rand, origin)
	if err != nil {
		return Key{}, err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return Key{}, err
	}
	return Key{Signer: signer, VerifierKey: vkey}, nil
}

// Log is a store's transparency log together with its key. It holds no
// state of its own, so any number of Logs over one store agree.
type Log struct {
	store *kv.Store
	key   Key
	// quorum is how many witness cosignatures make a checkpoint the one
	// Signed serves (zero: witnesses are not waited for).
	quorum int
}

// New returns the log of store, signed with key; quorum is how many
// witnesses must cosign a checkpoint before Signed serves it.
func New(store *kv.Store, key Key, quorum int) *Log {
	return &Log{store: store, key: key, quorum: quorum}
}

// ErrNoCheckpoint is returned by Signed and Latest in the moment between a
// new store's first start and its first signed checkpoint.
var ErrNoCheckpoint = errors.New("translog: the log has no signed checkpoint yet")

// Sign signs a checkpoint of the tree when it has grown since the last one
// and returns the newest checkpoint. Ed25519 signatures are deterministic,
// so two nodes that sign one tree sign the same note.
func (l *Log) Sign() (*kv.LogCheckpoint, error) {
	last, err := l.store.LastCheckpoint()
	if err != nil {
		return nil, err
	}
	tree, err := l.store.LogTree()
	if err != nil {
		return nil, err
	}
	if last != nil && last.Size >= tree.N {
		return last, nil
	}
	text := fmt.Sprintf("%s\n%d\n%s\n", l.key.Signer.Name(), tree.N, base64.StdEncoding.EncodeToString(tree.Hash[:]))
	msg, err := note.Sign(&note.Note{Text: text}, l.key.Signer)
	if err != nil {
		return nil, err
	}
	return l.store.SaveCheckpoint(&kv.LogCheckpoint{Size: tree.N, Root: tree.Hash, Note: msg})
}

// Signed returns the checkpoint clients are served by default, as one
// signed note with its cosignature lines: the newest that reached the
// witness quorum; until one has (or with no witnesses), the newest signed
// one.
func (l *Log) Signed() ([]byte, error) {
	latest, witnessed, err := l.store.Checkpoints()
	if err != nil {
		return nil, err
	}
	if l.quorum > 0 && witnessed != nil && len(witnessed.Cosignatures) >= l.quorum {
		latest = witnessed
	}
	return signedNote(latest)
}

// Latest returns the newest signed checkpoint with the cosignatures it has
// so far: fresher than Signed's, for a client that wants a recent record
// proven included.
func (l *Log) Latest() ([]byte, error) {
	latest, _, err := l.store.Checkpoints()
	if err != nil {
		return nil, err
	}
	return signedNote(latest)
}

// signedNote is cp's note with its cosignature lines, or ErrNoCheckpoint
// for none.
func signedNote(cp *kv.CosignedCheckpoint) ([]byte, error) {
	if cp == nil {
		return nil, ErrNoCheckpoint
	}
	return cp.SignedNote(), nil
}

// VerifierKey is the log's note verifier key as one line, as clients
// configure it.
func (l *Log) VerifierKey() []byte { return []byte(l.key.VerifierKey + "\n") }

// Tile returns the bytes of a hash tile or an entry bundle, or
// kv.ErrTileNotFound while the tree is not large enough for it.
func (l *Log) Tile(t tlog.Tile) ([]byte, error) { return l.store.LogTile(t) }
