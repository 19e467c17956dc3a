package server

import (
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv/fault"
)

// overlapPrefix is the part of a path below which routes overlap: for one
// method, httprouter (v1.3) cannot hold both a parameter and a static name
// in one segment, as DELETE /v1/auth/devices/:session_id beside DELETE
// /v1/auth/devices/enroll/channel/:channel_id would need (a router
// conflict: it panics at registration). Such routes are registered through
// handleOverlapping and dispatched by one catch-all route of their method.
const overlapPrefix = "/v1/auth/devices"

// overlapRoute is one route below overlapPrefix.
type overlapRoute struct {
	segments []string // below overlapPrefix; ":name" is a parameter
	pattern  string
	h        handlerFunc
}

// handleOverlapping registers h for method and pattern (which must start with
// overlapPrefix). Routes with a static segment win over a parameter in the
// same place.
func (s *Server) handleOverlapping(method, pattern string, h handlerFunc) {
	s.routeList = append(s.routeList, route{method, pattern})
	if s.overlaps == nil {
		s.overlaps = map[string][]overlapRoute{}
	}
	rel := strings.TrimPrefix(pattern, overlapPrefix+"/")
	rt := overlapRoute{segments: strings.Split(rel, "/"), pattern: pattern, h: h}
	routes := append(s.overlaps[method], rt)
	sort.SliceStable(routes, func(i, j int) bool {
		return !strings.HasPrefix(routes[i].segments[0], ":") && strings.HasPrefix(routes[j].segments[0], ":")
	})
	s.overlaps[method] = routes
	if len(routes) > 1 {
		return
	}
	s.router.Handle(method, overlapPrefix+"/*rest", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		rt, params, ok := s.overlapMatch(method, r.URL.Path)
		if !ok {
			s.noRoute(w, r)
			return
		}
		infoFrom(r).route = rt.pattern
		if err := rt.h(w, r, params); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// overlapMatch finds the overlapping route of method that path (below
// overlapPrefix) has the shape of.
func (s *Server) overlapMatch(method, path string) (overlapRoute, httprouter.Params, bool) {
	segs := strings.Split(strings.TrimPrefix(path, overlapPrefix+"/"), "/")
	for _, rt := range s.overlaps[method] {
		if params, ok := rt.match(segs); ok {
			return rt, params, true
		}
	}
	return overlapRoute{}, nil, false
}

// noRoute answers a request no route takes: httprouter's NotFound,
// MethodNotAllowed and automatic OPTIONS, and an overlap catch-all when no
// overlapping route has the path's shape. The Allow list is computed here
// rather than taken from httprouter, whose list names a method with
// overlapping routes for every path below overlapPrefix (its catch-all
// matches them all): a path with no route for any method is 404 for every
// method, OPTIONS included; otherwise an OPTIONS request gets the Allow
// list with 200, as from httprouter, and any other method 405 with it.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	allow := s.allowed(r.URL.Path)
	if allow == "" {
		w.Header().Del("Allow")
		s.writeError(w, r, fault.Errorf(fault.ECodeNotFound, "no such resource"))
		return
	}
	w.Header().Set("Allow", allow)
	if r.Method != http.MethodOptions {
		s.writeError(w, r, fault.Errorf(fault.ECodeMethodNotAllowed, "method not allowed on this resource"))
	}
}

// allowed is the Allow value for path by httprouter's rule (the methods with
// a route for it, and OPTIONS, sorted; empty when there are none), except
// that below overlapPrefix a method with overlapping routes counts only when
// one of them has the path's shape.
func (s *Server) allowed(path string) string {
	var allow []string
	seen := map[string]bool{http.MethodOptions: true}
	for _, rt := range s.routeList {
		m := rt.method
		if seen[m] {
			continue
		}
		seen[m] = true
		var found bool
		if s.overlaps[m] != nil && strings.HasPrefix(path, overlapPrefix+"/") {
			_, _, found = s.overlapMatch(m, path)
		} else {
			h, _, _ := s.router.Lookup(m, path)
			found = h != nil
		}
		if found {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		return ""
	}
	allow = append(allow, http.MethodOptions)
	slices.Sort(allow)
	return strings.Join(allow, ", ")
}

// match reports whether the path segments segs (below overlapPrefix) have
// the route's shape, and the parameters they give it.
func (rt overlapRoute) match(segs []string) (httprouter.Params, bool) {
	if len(segs) != len(rt.segments) {
		return nil, false
	}
	var ps httprouter.Params
	for i, want := range rt.segments {
		switch {
		case strings.HasPrefix(want, ":"):
			if segs[i] == "" {
				return nil, false
			}
			ps = append(ps, httprouter.Param{Key: want[1:], Value: segs[i]})
		case segs[i] != want:
			return nil, false
		}
	}
	return ps, true
}
