package server

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/kvtest"
)

// TestRefusalProblems: each rule kv refuses input by reaches the client as
// the problem it was before kv stopped naming request fields: the same
// status, code, field and detail, also through a wrapping error.
func TestRefusalProblems(t *testing.T) {
	store, err := kvtest.Open(filepath.Join(t.TempDir(), "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := New(keyedConfig(), store, nil)
	var refusal error
	s.handle(http.MethodGet, "/refuse", func(http.ResponseWriter, *http.Request, httprouter.Params) error {
		return fmt.Errorf("while storing: %w", refusal)
	})
	for _, tc := range []struct {
		refusal             *kv.Refusal
		status              int
		code, field, detail string
	}{
		{&kv.Refusal{Rule: kv.RuleEmail}, 422, "error.request.invalid", "email",
			"email must be an address of 3 to 254 characters with one @"},
		{&kv.Refusal{Rule: kv.RuleOpProtocol, Values: []string{"2025-01-15", "2026-03-01"}}, 409, "error.op.protocol_mismatch", "manifest_envelope.protocol_version",
			"the manifest was written under protocol 2025-01-15; the album is pinned to 2026-03-01"},
		{&kv.Refusal{Rule: kv.RuleOpAuthor}, 403, "error.op.foreign_author", "manifest_envelope.created_by_user",
			"created_by_user is not the caller"},
		{&kv.Refusal{Rule: kv.RuleOpMetadataSent}, 422, "error.op.metadata_mismatch", "metadata_blob",
			"metadata_blob must be sent exactly when the manifest commits to metadata_blob_hash"},
		{&kv.Refusal{Rule: kv.RuleOpMetadataHash}, 422, "error.op.metadata_mismatch", "metadata_blob",
			"metadata_blob does not hash to metadata_blob_hash"},
		{&kv.Refusal{Rule: kv.RuleOpReplaceOriginal}, 422, "error.request.invalid", "manifest_envelope.original_blob_hash",
			"original_blob_hash is required on a replace"},
		{&kv.Refusal{Rule: kv.RuleOpCiphertextHeld}, 422, "error.op.blob_missing", "manifest_envelope.ciphertext_hash",
			"manifest_envelope.ciphertext_hash names a blob the caller does not hold"},
		{&kv.Refusal{Rule: kv.RuleOpOriginalHeld}, 422, "error.op.blob_missing", "manifest_envelope.original_blob_hash",
			"manifest_envelope.original_blob_hash names a blob the caller does not hold"},
		{&kv.Refusal{Rule: kv.RuleShareIDFree}, 422, "error.share.id_taken", "opaque_id",
			"the opaque_id is already registered"},
		{&kv.Refusal{Rule: kv.RuleShareServesHeld, Values: []string{"ab12"}}, 422, "error.share.blob_not_owned", "serves",
			"serves names ab12, which is not a blob the caller holds"},
		{&kv.Refusal{Rule: kv.RuleUpgradeNewer, Values: []string{"2025-01-15", "2026-03-01"}}, 400, "error.upgrade.bad_target", "to_protocol_version",
			"to_protocol_version 2025-01-15 is not newer than the album's protocol 2026-03-01"},
	} {
		refusal = tc.refusal
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/refuse", nil))
		var got map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v in %q", tc.refusal.Rule, err, rec.Body)
		}
		want := map[string]any{
			"type": problemTypeBase + tc.code, "title": http.StatusText(tc.status), "status": float64(tc.status),
			"code": tc.code, "field": tc.field, "detail": tc.detail,
		}
		if rec.Code != tc.status || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %d %v, want %d %v", tc.refusal.Rule, rec.Code, got, tc.status, want)
		}
	}
}

// TestEveryRuleIsWorded: every rule kv/refusal.go declares has its field
// and detail in refusalWording, except the one whose field is the
// request's (checkNewPassword).
func TestEveryRuleIsWorded(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "kv", "refusal.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		vs, ok := node.(*ast.ValueSpec)
		if !ok || vs.Type == nil || fmt.Sprint(vs.Type) != "Rule" {
			return true
		}
		for _, name := range vs.Names {
			n++
			if _, ok := refusalWording[kv.Rule(ruleValue(t, vs, name))]; !ok && name.Name != "RuleNewPassword" {
				t.Errorf("kv.%s has no wording in refusalWording", name.Name)
			}
		}
		return true
	})
	if n == 0 {
		t.Fatal("found no rule in kv/refusal.go")
	}
}

// ruleValue is the string a Rule constant is declared with.
func ruleValue(t *testing.T, vs *ast.ValueSpec, name *ast.Ident) string {
	t.Helper()
	for i, n := range vs.Names {
		if n == name {
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				return lit.Value[1 : len(lit.Value)-1]
			}
		}
	}
	t.Fatalf("kv.%s is not a string literal", name.Name)
	return ""
}
