package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

func (s *Server) registerAlbumRoutes() {
	s.handle(http.MethodPost, "/v1/albums", s.bearer(s.handleAlbumProvision))
	s.handle(http.MethodGet, "/v1/albums", s.bearer(s.handleAlbumList))
}

type provisionAlbumRequest struct {
	AlbumID *string `json:"album_id"`
}

func (req *provisionAlbumRequest) validate() error {
	if err := required("album_id", req.AlbumID); err != nil {
		return err
	}
	if !isCanonicalUUID(*req.AlbumID) {
		return invalid("album_id", "album_id must be a canonical lowercase hyphenated UUID")
	}
	return nil
}

type provisionAlbumResponse struct {
	AlbumID         string `json:"album_id"`
	ProtocolVersion string `json:"protocol_version"`
	Created         bool   `json:"created"`
}

// handles "POST /v1/albums": binds the album id to the caller, pinned to
// the server's album protocol; idempotent for the same caller.
func (s *Server) handleAlbumProvision(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	var req provisionAlbumRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	album, created, err := s.store.ProvisionAlbum(sess.AccountID, *req.AlbumID, s.cfg.AlbumProtocol)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return writeJSON(w, status, provisionAlbumResponse{AlbumID: album.ID, ProtocolVersion: album.ProtocolVersion, Created: created})
}

type albumView struct {
	AlbumID         string `json:"album_id"`
	ProtocolVersion string `json:"protocol_version"`
	CreatedAt       string `json:"created_at"`
	SyncSeq         uint64 `json:"sync_seq"`
	// DeletedAt and PurgeAt are set while the album is in the trash
	// (server/PROTOCOL.md §9).
	DeletedAt string `json:"deleted_at,omitempty"`
	PurgeAt   string `json:"purge_at,omitempty"`
}

type albumsResponse struct {
	Albums []albumView `json:"albums"`
}

// handles "GET /v1/albums": the caller's albums, oldest first.
func (s *Server) handleAlbumList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	albums, err := s.store.Albums(caller(r).AccountID)
	if err != nil {
		return err
	}
	resp := albumsResponse{Albums: make([]albumView, 0, len(albums))}
	for _, a := range albums {
		v := albumView{AlbumID: a.ID, ProtocolVersion: a.ProtocolVersion, CreatedAt: formatTime(a.CreatedAt), SyncSeq: a.SyncSeq}
		if !a.DeletedAt.IsZero() {
			v.DeletedAt, v.PurgeAt = formatTime(a.DeletedAt), formatTime(a.PurgeAt)
		}
		resp.Albums = append(resp.Albums, v)
	}
	return writeJSON(w, http.StatusOK, resp)
}
