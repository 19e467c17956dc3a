package kv_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestDomainSpeaksNoWire: no file of kv or its engines names a request
// field (fault.FieldErrorf, an Error's Field) or returns a code of the
// catalog's HTTP part (kv/fault/http.go); the server names fields and
// answers those codes.
func TestDomainSpeaksNoWire(t *testing.T) {
	httpOnly := map[string]bool{}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("fault", "http.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for _, name := range vs.Names {
				httpOnly[name.Name] = true
			}
		}
		return true
	})
	if len(httpOnly) == 0 {
		t.Fatal("found no code in kv/fault/http.go")
	}
	files := 0
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "fault" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		src, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(src, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "fault" && (n.Sel.Name == "FieldErrorf" || httpOnly[n.Sel.Name]) {
					t.Errorf("%s uses fault.%s, which is the server's", path, n.Sel.Name)
				}
			case *ast.KeyValueExpr:
				if key, ok := n.Key.(*ast.Ident); ok && key.Name == "Field" {
					t.Errorf("%s sets a Field: a request field is the server's to name", path)
				}
			}
			return true
		})
		return nil
	})
	if err != nil || files < 20 {
		t.Fatalf("walked %d files of kv: %v", files, err)
	}
}
