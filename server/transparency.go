package server

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
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
	s.handle(http.MethodGet, "/v1/transparency/checkpoint/latest", s.handleLatestCheckpoint)
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

// handles "GET /v1/transparency/checkpoint": the newest checkpoint that
// reached the witness quorum, with its cosignature lines; until one has (or
// with no witnesses), the newest signed one.
func (s *Server) handleCheckpoint(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	latest, witnessed, err := s.store.Checkpoints()
	if err != nil {
		return err
	}
	if s.cfg.WitnessQuorum > 0 && witnessed != nil && len(witnessed.Cosignatures) >= s.cfg.WitnessQuorum {
		latest = witnessed
	}
	return writeCheckpoint(w, latest)
}

// handles "GET /v1/transparency/checkpoint/latest": the newest signed
// checkpoint with the cosignatures it has so far, fresher than the
// witnessed one, for a client that wants a recent record proven included.
func (s *Server) handleLatestCheckpoint(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	latest, _, err := s.store.Checkpoints()
	if err != nil {
		return err
	}
	return writeCheckpoint(w, latest)
}

// writeCheckpoint writes cp as one signed note; nil is the moment between a
// new store's first start and its first signed checkpoint.
func writeCheckpoint(w http.ResponseWriter, cp *kv.CosignedCheckpoint) error {
	if cp == nil {
		return fault.Errorf(fault.ECodeNotFound, "the log has no signed checkpoint yet")
	}
	return writeBody(w, http.StatusOK, "text/plain; charset=utf-8", cacheCheckpoint, cp.SignedNote())
}

// handles "GET /v1/transparency/key".
func (s *Server) handleLogKey(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	return writeBody(w, http.StatusOK, "text/plain; charset=utf-8", "public, max-age=86400", []byte(s.cfg.LogKey.VerifierKey+"\n"))
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
	return writeBody(w, http.StatusOK, "application/octet-stream", cacheImmutable, data)
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

// witnessCollector serves what the store knows of each configured witness,
// read when scraped, so every node sharing the store reports the same
// figures whichever node submits.
type witnessCollector struct{ s *Server }

var (
	witnessRefusalsDesc = prometheus.NewDesc("sealbox_witness_refusals_total",
		"Checkpoint submissions a witness refused or never answered, by witness and reason (conflict, forbidden, not_found, unreachable, bad_answer).",
		[]string{"witness", "reason"}, nil)
	witnessSizeDesc = prometheus.NewDesc("sealbox_witness_tree_size",
		"The tree size each witness last accepted (cosigned) or said it holds.", []string{"witness"}, nil)
	witnessConflictDesc = prometheus.NewDesc("sealbox_witness_conflict",
		"1 while a witness refuses the log's tree as another history than the one it saw (a fork or a rollback), else 0.",
		[]string{"witness"}, nil)
)

func (c witnessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- witnessRefusalsDesc
	ch <- witnessSizeDesc
	ch <- witnessConflictDesc
}

func (c witnessCollector) Collect(ch chan<- prometheus.Metric) {
	states, err := c.s.store.WitnessStates()
	if err != nil {
		c.s.log.Warn().Err(err).Msg("metrics: read the witnesses' state")
		return
	}
	for _, vkey := range c.s.cfg.Witnesses {
		st, name := states[vkey], witnessName(vkey)
		for reason, n := range st.Refusals {
			ch <- prometheus.MustNewConstMetric(witnessRefusalsDesc, prometheus.CounterValue, float64(n), name, reason)
		}
		ch <- prometheus.MustNewConstMetric(witnessSizeDesc, prometheus.GaugeValue, float64(st.Size), name)
		conflict := 0.0
		if st.Conflict != "" {
			conflict = 1
		}
		ch <- prometheus.MustNewConstMetric(witnessConflictDesc, prometheus.GaugeValue, conflict, name)
	}
}
