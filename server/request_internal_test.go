package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// requestTypes is every JSON request body the API decodes, with the
// validate step its handler runs after decoding and the codes that step may
// refuse with (besides 422 error.request.invalid).
var requestTypes = []struct {
	name     string
	new      func() any
	validate func(v any) error
	codes    []string
}{
	{"register", func() any { return &registerRequest{} }, func(v any) error { _, err := v.(*registerRequest).validate(checkNewPassword); return err }, nil},
	{"login", func() any { return &loginRequest{} }, func(v any) error { _, err := v.(*loginRequest).validate(checkPresentedPassword); return err }, nil},
	{"refresh", func() any { return &refreshRequest{} }, func(v any) error { return required("refresh_token", v.(*refreshRequest).RefreshToken) }, nil},
	{"reauthenticate", func() any { return &reauthenticateRequest{} }, func(v any) error {
		req := v.(*reauthenticateRequest)
		if err := required("password", req.Password); err != nil {
			return err
		}
		return checkPresentedPassword("password", *req.Password)
	}, nil},
	{"password", func() any { return &changePasswordRequest{} }, func(v any) error { return v.(*changePasswordRequest).validate() }, nil},
	{"profile", func() any { return &updateProfileRequest{} }, func(v any) error { return v.(*updateProfileRequest).validate() }, nil},
	{"redeem", func() any { return &redeemRequest{} }, func(v any) error { return v.(*redeemRequest).validate() }, nil},
	{"relay", func() any { return &relayRequest{} }, func(v any) error { return v.(*relayRequest).validate() }, nil},
	{"revoke-all", func() any { return &revokeAllRequest{} }, func(v any) error { return v.(*revokeAllRequest).validate() }, nil},
	{"share", func() any { return &issueShareRequest{} }, func(v any) error {
		_, err := v.(*issueShareRequest).validate(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
		return err
	}, nil},
	{"totp-code", func() any { return &codeRequest{} }, func(v any) error { return v.(*codeRequest).validate() }, nil},
	{"verify-totp", func() any { return &verifyLoginRequest{} }, func(v any) error { return v.(*verifyLoginRequest).validate() },
		[]string{fault.ECodeChallengeExpired}},
	{"album", func() any { return &provisionAlbumRequest{} }, func(v any) error { return v.(*provisionAlbumRequest).validate() }, nil},
	{"delete-account", func() any { return &deleteAccountRequest{} }, func(v any) error { return v.(*deleteAccountRequest).validate() }, nil},
	{"tombstone", func() any { return &tombstoneRequest{} }, func(v any) error {
		_, _, err := v.(*tombstoneRequest).validate("6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b")
		return err
	}, nil},
	{"album-tombstone", func() any { return &albumTombstoneRequest{} }, func(v any) error {
		_, _, err := v.(*albumTombstoneRequest).validate("6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b")
		return err
	}, nil},
}

// FuzzDecodeStrict decodes every body into every request type, then runs
// the type's validate step: nothing panics, every decoding refusal is a 400
// error.request.malformed, an accepted body is a single JSON object in UTF-8, and
// validation refuses only with 422 error.request.invalid (or the type's own
// listed codes). Seeds beyond these live in testdata/fuzz/FuzzDecodeStrict.
func FuzzDecodeStrict(f *testing.F) {
	for _, seed := range []string{
		`{"email":"a@b.c","password":"12345678"}`, `{}`, `[]`, `null`, `{"email":1}`,
		`{"email":"a"} {}`, `{"unknown":true}`, "\xff", `{"email":"\u0000"}`, ` {"password":"x"}`,
		`{"cohort_hash":{"a":[1,2]},"device_id":null}`,
		`{"direction":"to_enrollee","payload":"x"}`, `{"direction":"up","payload":"x"}`,
		`{"opaque_id":"0123456789abcdef0123456789abcdef","metadata_hash":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","serves":["e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],"wrapped_secret":"AA==","expires_at":"2030-01-01T00:00:00Z"}`,
		`{"mfa_token":"sbx_mfa_x","totp_code":"123456"}`, `{"album_id":"6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"}`,
		`{"display_name":"\u0007"}`, `{"current_password":"","new_password":"1234567"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, rt := range requestTypes {
			dst := rt.new()
			err := decodeStrict(body, dst)
			if err != nil {
				if code := fault.ErrorCode(err); code != fault.ECodeMalformed {
					t.Fatalf("%s: refusal with code %q (%v) for %q", rt.name, code, err, body)
				}
				continue
			}
			if trimmed := strings.TrimLeft(string(body), " \t\r\n"); trimmed == "" || trimmed[0] != '{' {
				t.Fatalf("%s: accepted a body that is not an object: %q", rt.name, body)
			}
			if !utf8.Valid(body) {
				t.Fatalf("%s: accepted a body that is not UTF-8: %q", rt.name, body)
			}
			if err := rt.validate(dst); err != nil {
				if code := fault.ErrorCode(err); code != fault.ECodeInvalid && !slices.Contains(rt.codes, code) {
					t.Fatalf("%s: validation refusal with code %q (%v) for %q", rt.name, code, err, body)
				}
			}
		}
	})
}

// FuzzExactKeys holds exactKeys, which steps over the body's bytes, to the
// walk it replaced, which read the body as encoding/json's tokens
// (tokenKeys, kept here as the oracle): on every body that is valid JSON,
// for every request type, both refuse the same key with the same problem or
// both accept. On a body that is not valid JSON (or not UTF-8) either may
// refuse first; FuzzDecodeStrict holds decodeStrict to refusing it.
func FuzzExactKeys(f *testing.F) {
	for _, seed := range []string{
		`{"email":"a@b.c","password":"12345678"}`, `{}`, `{"email":1,"email":2}`, `{"EMAIL":"x"}`,
		`{"\u0065mail":"x"}`, `{"email":"a","\u0065mail":"b"}`, `{"e\"mail":1}`, `{"email":{"x":[1,{"y":"}"}]}}`,
		`{"serves":["a",{"b":1}],"expires_at":null}`, `{"manifest_envelope":{"action":"create","caption":"x"}}`,
		`{"manifest_envelope":{"action":"create","action":"delete"}}`, `{"manifest_envelope":[{"x":1}]}`,
		`{"cohort_hash":{"a":[1,2]},"device_id":null}`, `{"email" : "x" , "password" : [ ] }`, `{"a":1e5,"b":-0.5,"c":true}`,
		opSeed,
	} {
		f.Add([]byte(seed))
	}
	types := []reflect.Type{reflect.TypeOf(&opRequest{})}
	for _, rt := range requestTypes {
		types = append(types, reflect.TypeOf(rt.new()))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, typ := range types {
			_, got := exactKeys(body, typ)
			if got != nil && fault.ErrorCode(got) != fault.ECodeMalformed {
				t.Fatalf("%v: refusal with code %q for %q", typ, fault.ErrorCode(got), body)
			}
			// decodeStrict refuses invalid UTF-8 before exactKeys reads it.
			if !json.Valid(body) || !utf8.Valid(body) || bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
				continue
			}
			want := tokenKeys(json.NewDecoder(bytes.NewReader(body)), typ, "")
			if problem(got) != problem(want) {
				t.Fatalf("%v: %q: exactKeys says %q, the token walk %q", typ, body, problem(got), problem(want))
			}
		}
	})
}

// problem is what a refusal of exactKeys tells the client: its field and
// message ("" for none).
func problem(err error) string {
	if err == nil {
		return ""
	}
	fe := err.(*fault.Error)
	return fe.Field + ": " + fe.Message
}

// tokenKeys is the oracle of FuzzExactKeys: the same rules as exactKeys,
// read through encoding/json's Decoder.Token.
func tokenKeys(dec *json.Decoder, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return malformedJSON(err)
	}
	open, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch {
	case reflect.PointerTo(t).Implements(unmarshalerType):
		return skipTokens(dec)
	case open == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for dec.More() {
			if err := tokenKeys(dec, t.Elem(), path); err != nil {
				return err
			}
		}
	case open == '{' && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		seen := make(map[string]bool)
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return malformedJSON(err)
			}
			key := tok.(string)
			field := key
			if path != "" {
				field = path + "." + key
			}
			if seen[key] {
				return fault.FieldErrorf(fault.ECodeMalformed, field, "%s appears more than once", field)
			}
			seen[key] = true
			valueType, ok := fields[key]
			if !ok {
				return fault.FieldErrorf(fault.ECodeMalformed, field, "unknown field %q", field)
			}
			if err := tokenKeys(dec, valueType, field); err != nil {
				return err
			}
		}
	default:
		return skipTokens(dec)
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return malformedJSON(err)
	}
	return nil
}

// skipTokens reads the rest of the array or object just opened.
func skipTokens(dec *json.Decoder) error {
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return malformedJSON(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// BenchmarkDecodeStrictOp is the strict decode of an op body: the UTF-8
// check, exactKeys and encoding/json's decode. Compare with
// BenchmarkDecodeOp from the same run, the decode alone.
func BenchmarkDecodeStrictOp(b *testing.B) {
	body := []byte(opSeed)
	for b.Loop() {
		var req opRequest
		if err := decodeStrict(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeOp(b *testing.B) {
	body := []byte(opSeed)
	for b.Loop() {
		var req opRequest
		if err := json.Unmarshal(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPanicAnswersProblem500(t *testing.T) {
	store, err := kvtest.Open(filepath.Join(t.TempDir(), "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logged strings.Builder
	cfg := keyedConfig()
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
	store, err := kvtest.Open(filepath.Join(t.TempDir(), "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s := New(keyedConfig(), store, nil)
	s.handle(http.MethodGet, "/fail", func(http.ResponseWriter, *http.Request, httprouter.Params) error {
		return errors.New("disk on fire at /secret/path")
	})
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/fail", nil))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "secret") || !strings.Contains(rec.Body.String(), "error.internal") {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}

// readerFromWriter is a ResponseWriter whose ReadFrom records its source,
// as net/http's does before it turns to sendfile.
type readerFromWriter struct {
	*httptest.ResponseRecorder
	src io.Reader
}

func (w *readerFromWriter) ReadFrom(src io.Reader) (int64, error) {
	w.src = src
	return io.Copy(w.ResponseRecorder, src)
}

// The access log's recorder must keep io.ReaderFrom, or blob reads lose
// sendfile: a file copied the way http.ServeContent copies (io.CopyN, so a
// LimitedReader around the *os.File) reaches the wrapped writer's ReadFrom
// with the file inside.
func TestRecorderKeepsReaderFrom(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "blob")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("ciphertext")
	f.Seek(0, io.SeekStart)
	inner := &readerFromWriter{ResponseRecorder: httptest.NewRecorder()}
	rec := &recorder{ResponseWriter: inner}
	n, err := io.CopyN(rec, f, 10)
	lr, ok := inner.src.(*io.LimitedReader)
	if err != nil || n != 10 || !ok || lr.R != f {
		t.Fatalf("copied %d (%v); ReadFrom got %T, want a LimitedReader around the *os.File", n, err, inner.src)
	}
	if rec.status != http.StatusOK || rec.bytes != 10 {
		t.Fatalf("recorded status %d, %d bytes", rec.status, rec.bytes)
	}
}

// TestDecodeStrictKeys: keys must be the schema's exact spelling, once each,
// at every depth; the problem names the key by its path. Values that decode
// themselves (advisory fields) are not looked into.
func TestDecodeStrictKeys(t *testing.T) {
	const envelope = `"manifest_cbor":"AA==","manifest_envelope":{"action":"create"`
	cases := []struct {
		name  string
		dst   func() any
		body  string
		field string // "" when the body is accepted
	}{
		{"exact keys", func() any { return &loginRequest{} }, `{"email":"a@b.c","password":"x"}`, ""},
		{"key in another case", func() any { return &loginRequest{} }, `{"Email":"a@b.c","password":"x"}`, "Email"},
		{"key twice", func() any { return &loginRequest{} }, `{"email":"a@b.c","password":"x","password":"y"}`, "password"},
		{"advisory value not looked into", func() any { return &loginRequest{} }, `{"email":"a@b.c","password":"x","cohort_hash":{"a":1,"a":2,"A":[{}]}}`, ""},
		{"nested exact", func() any { return &opRequest{} }, `{` + envelope + `}}`, ""},
		{"nested key in another case", func() any { return &opRequest{} }, `{` + envelope + `,"Key_Mode":"derived"}}`, "manifest_envelope.Key_Mode"},
		{"nested key twice", func() any { return &opRequest{} }, `{` + envelope + `,"action":"replace"}}`, "manifest_envelope.action"},
		{"nested unknown key", func() any { return &opRequest{} }, `{` + envelope + `,"caption":"x"}}`, "manifest_envelope.caption"},
		{"unknown key after a nested object", func() any { return &opRequest{} }, `{` + envelope + `},"extra":1}`, "extra"},
		{"array of strings", func() any { return &issueShareRequest{} }, `{"serves":["a","b"],"opaque_id":"x"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeStrict([]byte(tc.body), tc.dst())
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ke *fault.Error
			if !errors.As(err, &ke) || ke.Code != fault.ECodeMalformed || ke.Field != tc.field {
				t.Fatalf("got %#v, want error.request.malformed naming %q", err, tc.field)
			}
		})
	}
}

// TestDecodeEnum: an enum field takes exactly one of its strings; any other
// string or JSON type is a malformed field naming every choice.
func TestDecodeEnum(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		values     []string
		want       string // the value, or the message of the refusal
		refused    bool
	}{
		{"first", `"create"`, []string{"create", "replace"}, "create", false},
		{"last", `"replace"`, []string{"create", "replace"}, "replace", false},
		{"other string", `"delete"`, []string{"create", "replace"}, "action must be create or replace", true},
		{"case differs", `"Create"`, []string{"create", "replace"}, "action must be create or replace", true},
		{"empty string", `""`, []string{"create", "replace"}, "action must be create or replace", true},
		{"number", `1`, []string{"create", "replace"}, "action must be create or replace", true},
		{"null", `null`, []string{"create", "replace"}, "action must be create or replace", true},
		{"object", `{"create":1}`, []string{"create", "replace"}, "action must be create or replace", true},
		{"one value", `"x"`, []string{"only"}, "action must be only", true},
		{"three values", `"x"`, []string{"a", "b", "c"}, "action must be a, b or c", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := decodeEnum([]byte(tc.json), "manifest_envelope.action", tc.values...)
			var fe *fieldError
			switch {
			case !tc.refused && (err != nil || v != tc.want):
				t.Fatalf("got %q, %v; want %q", v, err, tc.want)
			case tc.refused && (!errors.As(err, &fe) || fe.field != "manifest_envelope.action" || fe.msg != tc.want):
				t.Fatalf("got %q, %v; want the field error %q", v, err, tc.want)
			}
		})
	}
}
