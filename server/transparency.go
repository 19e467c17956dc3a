package server

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// The transparency log of directory publishes is served in the C2SP
// tlog-tiles layout, unauthenticated and cacheable, so any client or
// monitor can audit it with golang.org/x/mod/sumdb/tlog: a signed checkpoint
// (C2SP signed note: origin, tree size, root hash), hash tiles and entry
// bundles of height 8, and the note verifier key.

func (s *Server) registerTransparencyRoutes() {
	s.handle(http.MethodGet, "/v1/transparency/checkpoint", s.handleCheckpoint)
	s.handle(http.MethodGet, "/v1/transparency/key", s.handleLogKey)
	s.handle(http.MethodGet, "/v1/transparency/tile/*path", s.handleTile)
}

// LogKey signs the log's checkpoints. The signer's name is the log's
// origin, the first line of every checkpoint.
type LogKey struct {
	Signer note.Signer
	// VerifierKey is the signer's public key in the note verifier form,
	// <name>+<hash>+<key>, as clients configure it.
	VerifierKey string
}

// ephemeralLogKey makes a key for a server whose configuration has none.
func ephemeralLogKey(rand io.Reader) LogKey {
	skey, vkey, err := note.GenerateKey(rand, "sealbox/ephemeral")
	if err != nil {
		panic("server: " + err.Error())
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		panic("server: " + err.Error())
	}
	return LogKey{Signer: signer, VerifierKey: vkey}
}

// tileHeight is the height of every tile (tlog-tiles fixes it at 8).
const tileHeight = 8

// headerLogIndex gives the index of a directory's record in the log.
const headerLogIndex = "X-Transparency-Index"

// Cache lifetimes: a tile's bytes never change once it exists, a
// checkpoint changes with every publish.
const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheCheckpoint = "public, max-age=5"
)

// handles "GET /v1/transparency/checkpoint".
func (s *Server) handleCheckpoint(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	cp, err := s.checkpoint()
	if err != nil {
		return err
	}
	return writeCacheable(w, "text/plain; charset=utf-8", cacheCheckpoint, cp.Note)
}

// checkpoint returns a signed checkpoint of the tree as it is now. It signs
// at most once per tree size: the last one is kept in memory and in the
// store, where a restart (or another node) finds it.
func (s *Server) checkpoint() (*kv.LogCheckpoint, error) {
	tree, err := s.store.LogTree()
	if err != nil {
		return nil, err
	}
	if cp := s.lastCheckpoint.Load(); cp != nil && cp.Size >= tree.N {
		return cp, nil
	}
	s.signing.Lock()
	defer s.signing.Unlock()
	if cp := s.lastCheckpoint.Load(); cp != nil && cp.Size >= tree.N {
		return cp, nil
	}
	if saved, err := s.store.LastCheckpoint(); err != nil {
		return nil, err
	} else if saved != nil && saved.Size >= tree.N {
		s.lastCheckpoint.Store(saved)
		return saved, nil
	}
	text := fmt.Sprintf("%s\n%d\n%s\n", s.cfg.LogKey.Signer.Name(), tree.N, base64.StdEncoding.EncodeToString(tree.Hash[:]))
	msg, err := note.Sign(&note.Note{Text: text}, s.cfg.LogKey.Signer)
	if err != nil {
		return nil, err
	}
	saved, err := s.store.SaveCheckpoint(&kv.LogCheckpoint{Size: tree.N, Root: tree.Hash, Note: msg})
	if err != nil {
		return nil, err
	}
	s.lastCheckpoint.Store(saved)
	return saved, nil
}

// handles "GET /v1/transparency/key".
func (s *Server) handleLogKey(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	return writeCacheable(w, "text/plain; charset=utf-8", "public, max-age=86400", []byte(s.cfg.LogKey.VerifierKey+"\n"))
}

// handles "GET /v1/transparency/tile/*path": a hash tile <L>/<N>[.p/<W>] or
// an entry bundle entries/<N>[.p/<W>]. A path no tile has is 400; a tile the
// tree is not yet large enough for is 404.
func (s *Server) handleTile(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) error {
	t, ok := parseTilePath(strings.TrimPrefix(ps.ByName("path"), "/"))
	if !ok {
		return fault.FieldErrorf(fault.ECodeMalformed, "path", "not a tile path: <L>/<N>[.p/<W>] or entries/<N>[.p/<W>]")
	}
	data, err := s.store.LogTile(t)
	if errors.Is(err, kv.ErrTileNotFound) {
		return fault.Errorf(fault.ECodeNotFound, "the log holds no such tile yet")
	}
	if err != nil {
		return err
	}
	return writeCacheable(w, "application/octet-stream", cacheImmutable, data)
}

// parseTilePath reads a tlog-tiles path below tile/. x/mod's tlog spells the
// same tiles with the height first and "data" for "entries"; the path is
// accepted only in its one canonical tlog-tiles spelling.
func parseTilePath(p string) (tlog.Tile, bool) {
	xmod := "tile/" + strconv.Itoa(tileHeight) + "/" + p
	if rest, ok := strings.CutPrefix(p, "entries/"); ok {
		xmod = "tile/" + strconv.Itoa(tileHeight) + "/data/" + rest
	}
	t, err := tlog.ParseTilePath(xmod)
	if err != nil || t.H != tileHeight || t.L > 63 || tilePath(t) != p {
		return tlog.Tile{}, false
	}
	return t, true
}

// tilePath is t's path below tile/ in the tlog-tiles spelling.
func tilePath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), "tile/"+strconv.Itoa(tileHeight)+"/")
	if rest, ok := strings.CutPrefix(p, "data/"); ok {
		return "entries/" + rest
	}
	return p
}

// writeCacheable writes a 200 answer shared caches may keep.
func writeCacheable(w http.ResponseWriter, contentType, cacheControl string, b []byte) error {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", cacheControl)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(b)
	return err
}
