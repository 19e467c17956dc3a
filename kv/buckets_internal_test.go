package kv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestBucketsAreDeclaredByNewBucket: every package-level bucket name of kv
// but the meta bucket is declared with newBucket, so it is among the
// buckets Open creates and a backup copies; and no two share a name.
func TestBucketsAreDeclaredByNewBucket(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "bucket") || name.Name == "bucketMeta" || i >= len(vs.Values) {
						continue
					}
					var fn *ast.Ident
					if call, ok := vs.Values[i].(*ast.CallExpr); ok {
						fn, _ = call.Fun.(*ast.Ident)
					}
					if fn == nil || fn.Name != "newBucket" {
						t.Errorf("%s: %s is not declared with newBucket", fset.Position(name.Pos()), name.Name)
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, b := range storeBuckets() {
		if seen[string(b)] {
			t.Errorf("bucket %s is declared twice", b)
		}
		seen[string(b)] = true
	}
}
