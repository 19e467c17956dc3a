package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// The tests in this file hold server/openapi.yaml to the code: its operations
// to the routes registered through handle and handleOverlapping, its error catalog
// to kv's codes and statusByCode, and each operation's error responses to the
// catalog, with no exceptions.

// catalogOnly are codes no operation lists, each for the reason given.
var catalogOnly = map[string]string{
	fault.ECodeNotFound:         "answered by the router when no route matches",
	fault.ECodeMethodNotAllowed: "answered by the router when the path lacks the method",
	fault.ECodeTooLarge:         "413 has no body, so the code is never sent",
	fault.ECodeBlobNotFound:     "mapped from blobs.ErrNotFound; no handler lets it out today",
	fault.ECodeInviteNotFound:   "the operator's `sealbox users uninvite` refusal; no route answers it",
}

// statusOverrides are the codes answered with another status than the
// table's on signed-in requests (statusOnSession).
var statusOverrides = map[string]string{
	fault.ECodeInvalidCode:  "403",
	fault.ECodeCodeReplayed: "403",
}

// openAPIDocument is server/openapi.yaml decoded generically.
type openAPIDocument struct {
	root map[string]any
}

// operation is one method of one path in the document.
type operation struct {
	method, path string // "GET", "/v1/albums/{album_id}/feed"
	op, pathItem map[string]any
}

func (o operation) String() string { return o.method + " " + o.path }

// loadOpenAPI parses the embedded document. yaml.v3 refuses malformed YAML
// and duplicate mapping keys, so this is also the well-formedness check.
func loadOpenAPI(t *testing.T) *openAPIDocument {
	t.Helper()
	var root map[string]any
	if err := yaml.Unmarshal(openAPIDoc, &root); err != nil {
		t.Fatalf("server/openapi.yaml: %v", err)
	}
	if v := root["openapi"]; v != "3.1.0" {
		t.Fatalf("openapi: got %v, want 3.1.0", v)
	}
	return &openAPIDocument{root}
}

// lookup follows a local reference such as "#/components/schemas/X".
func (d *openAPIDocument) lookup(ref string) (any, bool) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var v any = d.root
	for _, key := range strings.Split(rest, "/") {
		key = strings.NewReplacer("~1", "/", "~0", "~").Replace(key)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// deref returns the object v is, following $ref (responses, parameters,
// headers).
func (d *openAPIDocument) deref(t *testing.T, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		target, ok := d.lookup(ref)
		if !ok {
			t.Fatalf("unresolved $ref %q", ref)
		}
		m, _ = target.(map[string]any)
	}
	t.Fatalf("not an object: %v", v)
	return nil
}

var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func (d *openAPIDocument) operations(t *testing.T) []operation {
	t.Helper()
	paths, _ := d.root["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("the document has no paths")
	}
	var ops []operation
	for path, item := range paths {
		pi, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("path %s is not an object", path)
		}
		for _, m := range openAPIMethods {
			if op, ok := pi[m].(map[string]any); ok {
				ops = append(ops, operation{method: strings.ToUpper(m), path: path, op: op, pathItem: pi})
			}
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.String(), b.String()) })
	return ops
}

// catalog returns the document's error catalog: each components/schemas
// entry named error.* with its x-status.
func (d *openAPIDocument) catalog(t *testing.T) map[string]int {
	t.Helper()
	schemas, _ := d.lookup("#/components/schemas")
	out := map[string]int{}
	for name, v := range schemas.(map[string]any) {
		if !strings.HasPrefix(name, "error.") {
			continue
		}
		s, _ := v.(map[string]any)
		status, ok := s["x-status"].(int)
		if !ok {
			t.Errorf("catalog entry %s has no integer x-status", name)
			continue
		}
		if got := catalogConst(s); got != name {
			t.Errorf("catalog entry %s fixes code to %q", name, got)
		}
		out[name] = status
	}
	return out
}

// catalogConst is the code a catalog entry fixes with const in its allOf.
func catalogConst(s map[string]any) string {
	all, _ := s["allOf"].([]any)
	for _, part := range all {
		p, _ := part.(map[string]any)
		props, _ := p["properties"].(map[string]any)
		code, _ := props["code"].(map[string]any)
		if c, ok := code["const"].(string); ok {
			return c
		}
	}
	return ""
}

// problemCodes returns the catalog codes an error response's
// application/problem+json schema names: one $ref, or a oneOf of them.
func (d *openAPIDocument) problemCodes(t *testing.T, o operation, status string, resp map[string]any) []string {
	t.Helper()
	content, _ := resp["content"].(map[string]any)
	media, ok := content["application/problem+json"].(map[string]any)
	if !ok || len(content) != 1 {
		t.Errorf("%s %s: an error response must have exactly application/problem+json content", o, status)
		return nil
	}
	schema, _ := media["schema"].(map[string]any)
	refs := []any{schema}
	if one, ok := schema["oneOf"].([]any); ok {
		refs = one
	}
	var codes []string
	for _, r := range refs {
		m, _ := r.(map[string]any)
		ref, _ := m["$ref"].(string)
		code, ok := strings.CutPrefix(ref, "#/components/schemas/error.")
		if !ok || len(m) != 1 {
			t.Errorf("%s %s: the schema must be a catalog $ref or a oneOf of them, not %v", o, status, m)
			continue
		}
		codes = append(codes, "error."+code)
	}
	return codes
}

// openAPIPath turns an httprouter pattern into an OpenAPI path template.
func openAPIPath(pattern string) string {
	return routeParam.ReplaceAllString(pattern, "{$1}")
}

var routeParam = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)

func newOpenAPITestServer(t *testing.T) *Server {
	t.Helper()
	store, err := kvtest.Open(filepath.Join(t.TempDir(), "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return New(keyedConfig(), store, nil)
}

// keyedConfig is the production configuration with a server key, which New
// requires.
func keyedConfig() Config {
	cfg := DefaultConfig()
	cfg.SealKey = make([]byte, 32)
	return cfg
}

// TestOpenAPIMatchesRouter walks every registered route and every documented
// operation: each must be in the other.
func TestOpenAPIMatchesRouter(t *testing.T) {
	s := newOpenAPITestServer(t)
	doc := loadOpenAPI(t)
	registered := map[string]bool{}
	for _, r := range s.routeList {
		key := r.method + " " + openAPIPath(r.pattern)
		if registered[key] {
			t.Errorf("route %s is registered twice", key)
		}
		registered[key] = true
	}
	documented := map[string]bool{}
	for _, o := range doc.operations(t) {
		documented[o.String()] = true
	}
	for key := range registered {
		if !documented[key] {
			t.Errorf("route %s is registered but not described in server/openapi.yaml", key)
		}
	}
	for key := range documented {
		if !registered[key] {
			t.Errorf("server/openapi.yaml describes %s, which is not registered", key)
		}
	}
}

// TestOpenAPIErrorCatalog holds the document's catalog to kv's codes and to
// statusByCode, in both directions, and each code to its status.
func TestOpenAPIErrorCatalog(t *testing.T) {
	// The catalog's codes are every ECode* constant of kv/fault; each needs a
	// status in statusByCode (writeError answers a code missing from it
	// with 500).
	kvCodes := kvErrorCodes(t)
	for _, code := range kvCodes {
		if _, ok := statusByCode[code]; !ok {
			t.Errorf("catalog code %s has no status in statusByCode", code)
		}
	}
	for code := range statusByCode {
		if !slices.Contains(kvCodes, code) {
			t.Errorf("statusByCode maps %s, which kv/fault does not define", code)
		}
	}

	doc := loadOpenAPI(t)
	catalog := doc.catalog(t)
	for code, status := range statusByCode {
		got, ok := catalog[code]
		switch {
		case !ok:
			t.Errorf("code %s (%d) is missing from the catalog in server/openapi.yaml", code, status)
		case got != status:
			t.Errorf("code %s: server/openapi.yaml says %d, statusByCode %d", code, got, status)
		}
	}
	for code := range catalog {
		if _, ok := statusByCode[code]; !ok {
			t.Errorf("server/openapi.yaml catalogs %s, which statusByCode does not map", code)
		}
	}
}

// catalogFiles are the files that declare the catalog: its domain part and
// its HTTP part.
var catalogFiles = []string{"fault.go", "http.go"}

// kvErrorCodes parses the catalog, kv/fault's catalogFiles, for the values
// of its ECode* constants.
func kvErrorCodes(t *testing.T) []string {
	t.Helper()
	var codes []string
	for _, file := range catalogFiles {
		codes = append(codes, fileErrorCodes(t, filepath.Join("..", "kv", "fault", file))...)
	}
	return codes
}

// fileErrorCodes parses one file for the values of its ECode* constants.
func fileErrorCodes(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "ECode") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("kv.%s is not a string literal", name.Name)
				}
				code, _ := strconv.Unquote(lit.Value)
				codes = append(codes, code)
			}
		}
	}
	if len(codes) == 0 {
		t.Fatalf("found no ECode constants in %s", path)
	}
	return codes
}

// TestOpenAPIResponses checks every operation against the rules the
// document's description states: each error response names catalog codes of
// its status, 413 has no body, 401 carries WWW-Authenticate, rate limits carry
// Retry-After, every operation can answer 500, a bearer operation 401, one
// with a body 413; every path parameter is declared; every $ref resolves; and
// every catalog code is answered somewhere.
func TestOpenAPIResponses(t *testing.T) {
	doc := loadOpenAPI(t)
	if info, _ := doc.root["info"].(map[string]any); info["version"] != Version {
		t.Errorf("info.version: got %v, want %s (server.Version)", info["version"], Version)
	}
	catalog := doc.catalog(t)
	checkRefs(t, doc, doc.root, "")
	answered := map[string]bool{}
	ids := map[string]bool{}
	for _, o := range doc.operations(t) {
		id, _ := o.op["operationId"].(string)
		if id == "" || ids[id] {
			t.Errorf("%s: operationId %q is missing or not unique", o, id)
		}
		ids[id] = true
		checkPathParams(t, doc, o)

		security, ok := o.op["security"].([]any)
		if !ok {
			t.Errorf("%s: states no security (use [] for none)", o)
		}
		responses, _ := o.op["responses"].(map[string]any)
		has := func(status string) bool { _, ok := responses[status]; return ok }
		if !has("500") {
			t.Errorf("%s: no 500 response", o)
		}
		if len(security) > 0 && !has("401") {
			t.Errorf("%s: a bearer operation without a 401 response", o)
		}
		if _, ok := o.op["requestBody"]; ok && !has("413") {
			t.Errorf("%s: takes a body but lists no 413", o)
		}
		notAnswered, _ := o.op["x-not-answered"].([]any)
		for _, s := range notAnswered {
			if has(s.(string)) {
				t.Errorf("%s: %s is both answered and in x-not-answered", o, s)
			}
		}

		for status, v := range responses {
			resp := doc.deref(t, v)
			headers, _ := resp["headers"].(map[string]any)
			if status == "401" && headers["WWW-Authenticate"] == nil {
				t.Errorf("%s 401: no WWW-Authenticate header", o)
			}
			if status[0] != '4' && status[0] != '5' {
				continue
			}
			if status == "413" || o.method == http.MethodHead {
				if resp["content"] != nil {
					t.Errorf("%s %s: must have no body", o, status)
				}
				continue
			}
			codes := doc.problemCodes(t, o, status, resp)
			if len(security) > 0 && status == "401" && !slices.Contains(codes, fault.ECodeUnauthenticated) {
				t.Errorf("%s 401: a bearer operation must list %s", o, fault.ECodeUnauthenticated)
			}
			for _, code := range codes {
				answered[code] = true
				want, ok := catalog[code]
				if !ok {
					t.Errorf("%s %s: code %s is not in the catalog", o, status, code)
					continue
				}
				if strconv.Itoa(want) != status && statusOverrides[code] != status {
					t.Errorf("%s %s: code %s is answered with %d", o, status, code, want)
				}
				if code == fault.ECodeRateLimited && headers["Retry-After"] == nil {
					t.Errorf("%s %s: %s without a Retry-After header", o, status, code)
				}
			}
		}
	}
	for code := range catalog {
		if _, exempt := catalogOnly[code]; !answered[code] && !exempt {
			t.Errorf("no operation lists code %s", code)
		}
	}
}

// checkPathParams: the {names} of an operation's path are exactly its path
// parameters, declared on the path item or the operation.
func checkPathParams(t *testing.T, doc *openAPIDocument, o operation) {
	t.Helper()
	declared := map[string]bool{}
	for _, src := range []map[string]any{o.pathItem, o.op} {
		params, _ := src["parameters"].([]any)
		for _, p := range params {
			pm := doc.deref(t, p)
			if pm["in"] == "path" {
				declared[pm["name"].(string)] = true
			}
		}
	}
	inPath := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(o.path, -1) {
		inPath[m[1]] = true
		if !declared[m[1]] {
			t.Errorf("%s: path parameter %s is not declared", o, m[1])
		}
	}
	for name := range declared {
		if !inPath[name] {
			t.Errorf("%s: declares path parameter %s, which the path lacks", o, name)
		}
	}
}

// checkRefs walks the whole document: every $ref must resolve.
func checkRefs(t *testing.T, doc *openAPIDocument, v any, at string) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			if _, ok := doc.lookup(ref); !ok {
				t.Errorf("%s: $ref %q does not resolve", at, ref)
			}
		}
		for k, e := range x {
			checkRefs(t, doc, e, at+"/"+k)
		}
	case []any:
		for i, e := range x {
			checkRefs(t, doc, e, at+"/"+strconv.Itoa(i))
		}
	}
}

// TestOpenAPISecurityMatchesHandlers sends every registered route a request
// without a token: a bearer operation must answer 401
// error.auth.unauthenticated, and any other must not answer 401. The request
// carries each required header whose value the document fixes with const
// (Tus-Resumable), since a protocol check may rightly come before the token's.
func TestOpenAPISecurityMatchesHandlers(t *testing.T) {
	s := newOpenAPITestServer(t)
	doc := loadOpenAPI(t)
	ops := map[string]operation{}
	for _, o := range doc.operations(t) {
		ops[o.String()] = o
	}
	for _, r := range s.routeList {
		key := r.method + " " + openAPIPath(r.pattern)
		o, ok := ops[key]
		if !ok {
			continue // TestOpenAPIMatchesRouter reports it
		}
		security, _ := o.op["security"].([]any)
		bearer := len(security) > 0
		req := httptest.NewRequest(r.method, routeParam.ReplaceAllString(r.pattern, "x"), nil)
		for name, value := range doc.fixedHeaders(t, o) {
			req.Header.Set(name, value)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		got := rec.Code == http.StatusUnauthorized
		if got != bearer {
			t.Errorf("%s without a token answers %d; the document says bearer is %v", key, rec.Code, bearer)
		}
		if got && !strings.Contains(rec.Body.String(), `"code":"`+fault.ECodeUnauthenticated+`"`) {
			t.Errorf("%s without a token: %s", key, rec.Body)
		}
	}
}

// fixedHeaders returns the required header parameters of an operation whose
// schema fixes the value with const.
func (d *openAPIDocument) fixedHeaders(t *testing.T, o operation) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, src := range []map[string]any{o.pathItem, o.op} {
		params, _ := src["parameters"].([]any)
		for _, p := range params {
			pm := d.deref(t, p)
			schema, _ := pm["schema"].(map[string]any)
			value, ok := schema["const"].(string)
			if pm["in"] == "header" && pm["required"] == true && ok {
				out[pm["name"].(string)] = value
			}
		}
	}
	return out
}
