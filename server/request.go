package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"sealbox/kv/fault"
)

// Media types the endpoints accept.
const (
	mediaJSON  = "application/json"
	mediaOctet = "application/octet-stream"
	mediaCBOR  = "application/cbor"
)

// readBody reads the whole request body, refusing more than limit bytes with
// error.request.too_large (413), also for a chunked body with no
// Content-Length, and refusing a non-empty body whose Content-Type is not
// mediaType with 415. The body must arrive within BodyTimeout per MiB of
// limit (one MiB at least): a client trickling a body cannot hold its
// connection and goroutine for ever.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, mediaType string, limit int64) ([]byte, error) {
	return s.readBodyWithin(w, r, mediaType, limit, s.cfg.BodyTimeout*time.Duration(max(1, limit>>20)), "body-timeout")
}

// Body limits of the routes anyone may call without a token, each fitting
// its largest valid body: the credentials, tokens and codes of register,
// login, refresh and enrollment redemption, and a relay item (its payload,
// JSON-quoted, and a direction).
const (
	maxAuthBody  = 16 << 10
	maxRelayBody = maxRelayPayload + 4<<10
)

// decodeAnonJSON is decodeJSON for a route anyone may call without a
// token: the body may be at most limit bytes and must arrive whole within
// AnonBodyTimeout (or BodyTimeout, when shorter). HTTP/2 streams are held to it alike: the deadline is
// the stream's.
func (s *Server) decodeAnonJSON(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	timeout, flag := s.cfg.AnonBodyTimeout, "anon-body-timeout"
	if s.cfg.BodyTimeout < timeout {
		// An operator who lowered --body-timeout below it gets that.
		timeout, flag = s.cfg.BodyTimeout, "body-timeout"
	}
	body, err := s.readBodyWithin(w, r, mediaJSON, limit, timeout, flag)
	if err != nil {
		return err
	}
	return decodeStrict(body, dst)
}

// readBodyWithin is readBody with the whole body due within timeout; a
// client cut off by it is counted under the limit named timeoutFlag.
func (s *Server) readBodyWithin(w http.ResponseWriter, r *http.Request, mediaType string, limit int64, timeout time.Duration, timeoutFlag string) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fault.Errorf(fault.ECodeTooLarge, "request body too large")
	}
	rc := http.NewResponseController(w)
	// An error means the writer cannot set deadlines (a test recorder):
	// there is no connection to hold then.
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		// Cleared once the body is in: net/http then reads ahead on the
		// connection, and a deadline passing while the handler still works
		// would cancel the request's context. After a failure it stays, so
		// the rest of a stalled body is not waited for either.
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		if mappedError(err) != nil {
			return nil, err
		}
		if isTimeout(err) {
			s.countLimitRefusal(timeoutFlag)
		}
		return nil, fault.Errorf(fault.ECodeMalformed, "the request body could not be read")
	}
	if len(body) > 0 {
		if err := requireMediaType(r, mediaType); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// streamBody prepares a body too large to read into memory (a blob) for
// streaming: a Content-Length over limit is refused at once with 413, a
// non-empty body must be mediaType (415), and the body is read through
// s.bodyReader. The consumer enforces limit on a body without
// Content-Length. A chunked body's emptiness is known only by reading: one
// byte is peeked before the media type is required of it.
func (s *Server) streamBody(w http.ResponseWriter, r *http.Request, mediaType string, limit int64) (io.Reader, error) {
	if r.ContentLength > limit {
		return nil, fault.Errorf(fault.ECodeTooLarge, "request body too large")
	}
	body := s.bodyReader(w, r)
	empty := r.ContentLength == 0
	if r.ContentLength < 0 {
		peek := bufio.NewReaderSize(body, 16)
		_, err := peek.Peek(1)
		if err != nil && err != io.EOF {
			return nil, err
		}
		empty, body = err == io.EOF, peek
	}
	if !empty {
		if err := requireMediaType(r, mediaType); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// bodyReader reads a streamed body (a blob, a tus PATCH) of any length: a
// slow uplink may take hours, but a pause of BodyTimeout with no byte
// arriving cuts the connection. A failure to read (the client went away,
// paused too long, or sent less than it announced) becomes the 400 readBody
// gives, not an internal error.
func (s *Server) bodyReader(w http.ResponseWriter, r *http.Request) io.Reader {
	return &streamReader{r: r.Body, rc: http.NewResponseController(w), idle: s.cfg.BodyTimeout, s: s}
}

type streamReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
	s    *Server
}

func (b *streamReader) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.idle)) // see readBody
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		_ = b.rc.SetReadDeadline(time.Time{}) // see readBody
	case err != nil:
		if isTimeout(err) {
			b.s.countLimitRefusal("body-timeout")
		}
		err = fault.Errorf(fault.ECodeMalformed, "the request body could not be read")
	}
	return n, err
}

// isTimeout reports whether err is a deadline passing on a connection.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// requireMediaType refuses a request whose Content-Type is not mediaType
// (parameters such as charset are allowed).
func requireMediaType(r *http.Request, mediaType string) error {
	got, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || got != mediaType {
		return fault.Errorf(fault.ECodeUnsupportedMedia, "the body must be %s", mediaType)
	}
	return nil
}

// decodeJSON reads a strict JSON object body into dst: unknown keys,
// trailing data, a value of the wrong JSON type, or anything not an object
// answer 400 error.request.malformed. Required-field and value rules are the
// caller's validate step (422).
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	return s.decodeJSONLimit(w, r, dst, s.cfg.MaxBody, false)
}

// decodeJSONLimit is decodeJSON with an explicit size limit; allowEmpty
// treats a zero-byte body as {}.
func (s *Server) decodeJSONLimit(w http.ResponseWriter, r *http.Request, dst any, limit int64, allowEmpty bool) error {
	body, err := s.readBody(w, r, mediaJSON, limit)
	if err != nil {
		return err
	}
	if len(body) == 0 && allowEmpty {
		return nil
	}
	return decodeStrict(body, dst)
}

// decodeStrict is the one strict JSON decoder of request bodies. Before
// encoding/json decodes the body it refuses what that package lets through:
// invalid UTF-8 (which it would turn into U+FFFD, so two different passwords
// could decode alike), a key not in the schema, also one that matches a
// field only when case is ignored, and a key given twice (where the last
// would silently win). Keys are named by their path, as in
// "manifest_envelope.action".
func decodeStrict(body []byte, dst any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fault.Errorf(fault.ECodeMalformed, "the body must be a JSON object")
	}
	if !utf8.Valid(body) {
		return fault.Errorf(fault.ECodeMalformed, "the body is not valid UTF-8")
	}
	if err := exactKeys(json.NewDecoder(bytes.NewReader(body)), reflect.TypeOf(dst), ""); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(dst); err != nil {
		return malformedJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fault.Errorf(fault.ECodeMalformed, "unexpected data after the JSON object")
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// exactKeys reads the next JSON value from dec, a value that is to decode
// into type t, and refuses any object key that is not exactly the JSON name
// of a field of the struct it decodes into, or that appears twice in one
// object; it descends into struct fields and slice elements. path is the
// value's field path, for the problem's field member. A value whose type
// decodes itself (a json.Unmarshaler) checks its own content and is
// skipped, as is a value of any other type (request types hold no maps), or
// of the wrong JSON type, which decoding then refuses.
func exactKeys(dec *json.Decoder, t reflect.Type, path string) error {
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
		return skipValue(dec, open)
	case open == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for dec.More() {
			if err := exactKeys(dec, t.Elem(), path); err != nil {
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
			if err := exactKeys(dec, valueType, field); err != nil {
				return err
			}
		}
	default:
		return skipValue(dec, open)
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return malformedJSON(err)
	}
	return nil
}

// skipValue reads the rest of the array or object opened by open.
func skipValue(dec *json.Decoder, open json.Delim) error {
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

// jsonFieldCache maps a struct type to its fields by exact JSON name.
var jsonFieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields returns the struct's fields by the JSON name encoding/json
// decodes them from: the json tag's name, or the Go name when the tag has
// none. Request types do not embed structs (an embedded struct's fields
// would be missing here, and its keys refused: a test would say so).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := jsonFieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := make(map[string]reflect.Type)
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
			continue
		case name == "":
			name = f.Name
		}
		m[name] = f.Type
	}
	jsonFieldCache.Store(t, m)
	return m
}

// malformedJSON turns a decoder error into a 400 that names the field when
// it can, without echoing the value.
func malformedJSON(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fault.FieldErrorf(fault.ECodeMalformed, te.Field, "%s has the wrong JSON type", te.Field)
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return fault.FieldErrorf(fault.ECodeMalformed, fe.field, "%s", fe.msg)
	}
	return fault.Errorf(fault.ECodeMalformed, "the body is not valid JSON")
}

// fieldError lets a custom UnmarshalJSON refuse a value as malformed (400),
// for example an enum string outside its set.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.msg }

// decodeEnum decodes the JSON value b of field, which must be one of the
// strings values. Anything else, another string or another JSON type, is
// malformed (400) naming field, as server/PROTOCOL.md §1 decides for enums.
func decodeEnum(b []byte, field string, values ...string) (string, error) {
	var v string
	if json.Unmarshal(b, &v) != nil || !slices.Contains(values, v) {
		name := field[strings.LastIndexByte(field, '.')+1:]
		last := len(values) - 1
		choice := values[last]
		if last > 0 {
			choice = strings.Join(values[:last], ", ") + " or " + choice
		}
		return "", &fieldError{field: field, msg: name + " must be " + choice}
	}
	return v, nil
}

// required returns 422 naming field when a required value is missing or null.
func required[T any](field string, v *T) error {
	if v == nil {
		return fault.FieldErrorf(fault.ECodeInvalid, field, "%s is required", field)
	}
	return nil
}

// invalid is a 422 about one field's value.
func invalid(field, format string, args ...any) error {
	return fault.FieldErrorf(fault.ECodeInvalid, field, format, args...)
}

// optionalString distinguishes an absent key (Set false) from an explicit
// null (Set true, Value nil) and a string.
type optionalString struct {
	Set   bool
	Value *string
}

func (o *optionalString) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return errors.New("a value that must be a string or null is not")
	}
	o.Value = &v
	return nil
}

// advisoryString accepts any JSON value and keeps it only when it is a
// string: advisory fields (cohort_hash, device_id) are dropped, never
// refused, when unusable.
type advisoryString string

func (a *advisoryString) UnmarshalJSON(b []byte) error {
	var v string
	if json.Unmarshal(b, &v) == nil {
		*a = advisoryString(v)
	}
	return nil
}

// clientAddr is the TCP peer, or with --trust-proxy the last hop of
// X-Forwarded-For (the address the trusted proxy saw), normalised so one
// client has one spelling: an IPv4-mapped IPv6 address is the IPv4
// address, and a port or an IPv6 zone is dropped. A hop that is no
// address at all is kept as sent (at most 64 bytes of it).
func (s *Server) clientAddr(r *http.Request) string {
	if s.cfg.TrustProxy {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			hops := strings.Split(xff[len(xff)-1], ",")
			if last := strings.TrimSpace(hops[len(hops)-1]); last != "" {
				return normalizeAddr(last)
			}
		}
	}
	return normalizeAddr(r.RemoteAddr)
}

// normalizeAddr is the address in a, which may carry a port ("host:port",
// "[v6]:port") or an IPv6 zone, in its one canonical spelling.
func normalizeAddr(a string) string {
	addr, err := netip.ParseAddr(a)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(a)
		if err2 != nil {
			return truncate(a, 64)
		}
		addr = ap.Addr()
	}
	return addr.Unmap().WithZone("").String()
}

// rateKey is the client address as the per-address limits count it: an
// IPv4 address whole, an IPv6 address by its first IPv6Prefix bits, since
// one subscriber usually holds a whole /64 and would otherwise get a fresh
// bucket per address.
func (s *Server) rateKey(r *http.Request) string {
	a := s.clientAddr(r)
	addr, err := netip.ParseAddr(a)
	if err != nil || !addr.Is6() {
		return a
	}
	p, err := addr.Prefix(s.cfg.IPv6Prefix)
	if err != nil {
		return a
	}
	return p.String()
}

// bearerToken returns the token of an `Authorization: Bearer` header, or "".
func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
