package server

import (
	_ "embed"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// openAPIDoc is server/openapi.yaml, the OpenAPI 3.1 description of every
// route, schema, status and error code. The tests in
// openapi_internal_test.go hold its operations equal to the router's routes
// and its error catalog equal to statusByCode.
//
//go:embed openapi.yaml
var openAPIDoc []byte

// mediaYAML is the document's media type: application/yaml (RFC 9512), which
// browsers, curl and every YAML tool know, rather than the newer and rarer
// application/openapi+yaml.
const mediaYAML = "application/yaml"

func (s *Server) registerOpenAPIRoutes() {
	s.handle(http.MethodGet, "/v1/openapi.yaml", s.handleOpenAPI)
}

// handles "GET /v1/openapi.yaml": the document built into the binary, to
// anyone; it describes the interface and holds nothing of any account.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return writeBytes(w, mediaYAML, openAPIDoc)
}
