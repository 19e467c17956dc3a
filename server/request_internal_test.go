package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"sealbox/kv"
)

// FuzzDecodeStrict: the strict decoder never panics and every refusal is a
// 400 error.request.malformed; an accepted body is a single JSON object.
func FuzzDecodeStrict(f *testing.F) {
	for _, seed := range []string{
		`{"email":"a@b.c","password":"12345678"}`, `{}`, `[]`, `null`, `{"email":1}`,
		`{"email":"a"} {}`, `{"unknown":true}`, "\xff", `{"email":"\u0000"}`, ` {"password":"x"}`,
		`{"cohort_hash":{"a":[1,2]},"device_id":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dst := range []any{&loginRequest{}, &updateProfileRequest{}, &changePasswordRequest{}} {
			err := decodeStrict(body, dst)
			if err == nil {
				if trimmed := strings.TrimLeft(string(body), " \t\r\n"); trimmed == "" || trimmed[0] != '{' {
					t.Fatalf("accepted a body that is not an object: %q", body)
				}
				continue
			}
			if code := kv.ErrorCode(err); code != kv.ECodeMalformed {
				t.Fatalf("refusal with code %q (%v) for %q", code, err, body)
			}
		}
	})
}

func TestPanicAnswersProblem500(t *testing.T) {
	store, err := kv.Open(filepath.Join(t.TempDir(), "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logged strings.Builder
	cfg := DefaultConfig()
	cfg.Log = zerolog.New(&logged)
	s := New(cfg, store, nil)
	s.handle(http.MethodGet, "/boom", func(http.ResponseWriter, *http.Request, httprouter.Params) error {
		panic("kaboom")
	})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != 500 || rec.Header().Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(rec.Body.String(), `"code":"error.internal"`) {
		t.Fatalf("got %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	if strings.Contains(rec.Body.String(), "kaboom") {
		t.Fatal("the panic value leaked into the response")
	}
	if !strings.Contains(logged.String(), "kaboom") || !strings.Contains(logged.String(), "stack") {
		t.Fatalf("the panic and its stack were not logged: %s", logged.String())
	}
}

func TestUnknownErrorIsOpaque500(t *testing.T) {
	store, err := kv.Open(filepath.Join(t.TempDir(), "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := New(DefaultConfig(), store, nil)
	s.handle(http.MethodGet, "/fail", func(http.ResponseWriter, *http.Request, httprouter.Params) error {
		return errors.New("disk on fire at /secret/path")
	})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/fail", nil))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "secret") || !strings.Contains(rec.Body.String(), "error.internal") {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}
