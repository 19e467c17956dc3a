package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/tlog"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/translog"
)

// The transparency log of directory publishes is served in the C2SP
// tlog-tiles layout, unauthenticated and cacheable, so any client or
// monitor can audit it with golang.org/x/mod/sumdb/tlog: a signed checkpoint
// (C2SP signed note: origin, tree size, root hash), hash tiles and entry
// bundles of height 8, and the note verifier key. The handlers parse paths
// and serve the bytes translog hands out; translog signs and picks.

func (s *Server) registerTransparencyRoutes() {
	s.handle(http.MethodGet, "/v1/transparency/checkpoint", s.handleCheckpoint)
	s.handle(http.MethodGet, "/v1/transparency/checkpoint/latest", s.handleLatestCheckpoint)
	s.handle(http.MethodGet, "/v1/transparency/key", s.handleLogKey)
	s.handle(http.MethodGet, "/v1/transparency/tile/*path", s.handleTile)
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

// handles "GET /v1/transparency/checkpoint": the checkpoint the log serves
// by default, the newest that reached the witness quorum (translog.Signed).
func (s *Server) handleCheckpoint(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	note, err := s.translog.Signed()
	if err != nil {
		return checkpointError(err)
	}
	return writeBody(w, http.StatusOK, "text/plain; charset=utf-8", cacheCheckpoint, note)
}

// handles "GET /v1/transparency/checkpoint/latest": the newest signed
// checkpoint with the cosignatures it has so far (translog.Latest).
func (s *Server) handleLatestCheckpoint(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	note, err := s.translog.Latest()
	if err != nil {
		return checkpointError(err)
	}
	return writeBody(w, http.StatusOK, "text/plain; charset=utf-8", cacheCheckpoint, note)
}

// checkpointError answers the log's refusal to hand out a checkpoint: none
// yet is the moment between a new store's first start and its first signed
// checkpoint.
func checkpointError(err error) error {
	if errors.Is(err, translog.ErrNoCheckpoint) {
		return fault.Errorf(fault.ECodeNotFound, "the log has no signed checkpoint yet")
	}
	return err
}

// handles "GET /v1/transparency/key".
func (s *Server) handleLogKey(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	return writeBody(w, http.StatusOK, "text/plain; charset=utf-8", "public, max-age=86400", s.translog.VerifierKey())
}

// handles "GET /v1/transparency/tile/*path": a hash tile <L>/<N>[.p/<W>] or
// an entry bundle entries/<N>[.p/<W>]. A path no tile has is 400; a tile the
// tree is not yet large enough for is 404.
func (s *Server) handleTile(w http.ResponseWriter, _ *http.Request, ps httprouter.Params) error {
	t, ok := parseTilePath(strings.TrimPrefix(ps.ByName("path"), "/"))
	if !ok {
		return fault.FieldErrorf(fault.ECodeMalformed, "path", "not a tile path: <L>/<N>[.p/<W>] or entries/<N>[.p/<W>]")
	}
	data, err := s.translog.Tile(t)
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
		"Checkpoint submissions a witness refused or never answered, by witness and reason (conflict, fault, forbidden, not_found, unreachable, redirect, bad_answer).",
		[]string{"witness", "reason"}, nil)
	witnessSizeDesc = prometheus.NewDesc("sealbox_witness_tree_size",
		"The tree size each witness last accepted (cosigned) or said it holds.", []string{"witness"}, nil)
	witnessConflictDesc = prometheus.NewDesc("sealbox_witness_conflict",
		"1 while a witness refuses the log's tree as another history than the one it saw (a fork), else 0.",
		[]string{"witness"}, nil)
	witnessFaultDesc = prometheus.NewDesc("sealbox_witness_fault",
		"1 while a witness's last answer was wrong (a tree size beyond the log, a redirect, a cosignature that does not verify), until it next cosigns, else 0.",
		[]string{"witness"}, nil)
)

func (c witnessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- witnessRefusalsDesc
	ch <- witnessSizeDesc
	ch <- witnessConflictDesc
	ch <- witnessFaultDesc
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
		fault := 0.0
		if st.Fault != "" {
			fault = 1
		}
		ch <- prometheus.MustNewConstMetric(witnessFaultDesc, prometheus.GaugeValue, fault, name)
	}
}
