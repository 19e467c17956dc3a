package server

import (
	"bufio"
	"bytes"
	"encoding/base64"
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

// readBody reads the whole request body, refusing more than the route's
// own limit or --max-body, whichever is smaller (capped), with
// error.request.too_large (413), also for a chunked body with no
// Content-Length, and refusing a non-empty body whose Content-Type is not
// mediaType with 415.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, mediaType string, limit int64) ([]byte, error) {
	return s.readBodyOwnLimit(w, r, mediaType, s.capped(limit))
}

// capped is a route's body limit under the operator's --max-body: a route's
// own limit fits its largest valid body, and an operator who wants less
// gets less (server/PROTOCOL.md §1).
func (s *Server) capped(limit int64) int64 {
	return min(limit, s.cfg.MaxBody)
}

// readBodyOwnLimit is readBody held to limit alone, for the one route whose
// bound is decided apart from --max-body: a lifecycle op, which carries its
// inline blobs (server/PROTOCOL.md §1). The body must arrive within
// BodyTimeout per MiB of limit (one MiB at least): a client trickling a
// body cannot hold its connection and goroutine for ever.
func (s *Server) readBodyOwnLimit(w http.ResponseWriter, r *http.Request, mediaType string, limit int64) ([]byte, error) {
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
// token: the body may be at most limit bytes (capped by --max-body) and must arrive whole within
// AnonBodyTimeout (or BodyTimeout, when shorter). HTTP/2 streams are held to it alike: the deadline is
// the stream's.
func (s *Server) decodeAnonJSON(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	timeout, flag := s.cfg.AnonBodyTimeout, "anon-body-timeout"
	if s.cfg.BodyTimeout < timeout {
		// An operator who lowered --body-timeout below it gets that.
		timeout, flag = s.cfg.BodyTimeout, "body-timeout"
	}
	body, err := s.readBodyWithin(w, r, mediaJSON, s.capped(limit), timeout, flag)
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
	body, err := s.readBody(w, r, mediaJSON, s.cfg.MaxBody)
	if err != nil {
		return err
	}
	return decodeStrict(body, dst)
}

// decodeJSONOrEmpty is decodeJSON that treats a zero-byte body as {}.
func (s *Server) decodeJSONOrEmpty(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := s.readBody(w, r, mediaJSON, s.cfg.MaxBody)
	if err != nil || len(body) == 0 {
		return err
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
	end, err := exactKeys(body, reflect.TypeOf(dst))
	if err != nil {
		return err
	}
	// The object is body[:end] when body is JSON; when it is not, the
	// decode refuses body[:end] or the check after it refuses the rest.
	if err := json.Unmarshal(body[:end], dst); err != nil {
		return malformedJSON(err)
	}
	if len(bytes.TrimLeft(body[end:], " \t\r\n")) > 0 {
		return fault.Errorf(fault.ECodeMalformed, "unexpected data after the JSON object")
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// exactKeys refuses any object key of body that is not exactly the JSON
// name of a field of the struct it decodes into, or that appears twice in
// one object, walking body as encoding/json would decode it into type t: it
// descends into struct fields and slice elements. A value whose type decodes
// itself (a json.Unmarshaler) checks its own content and is skipped, as is a
// value of any other type (request types hold no maps), or of the wrong JSON
// type, which decoding then refuses.
//
// It reads the bytes once without building tokens: strings, numbers and
// literals are only stepped over, so their content is checked by the decode
// that follows, not here. What it does check is the structure (colons,
// commas, brackets), so every key it compares is a key the decoder would
// see.
//
// It returns where the value it read ends.
func exactKeys(body []byte, t reflect.Type) (end int, err error) {
	sc := keyScanner{data: body}
	err = sc.value(t, "", nil)
	return sc.pos, err
}

// keyScanner is exactKeys' position in the body.
type keyScanner struct {
	data []byte
	pos  int
}

// notJSON is the refusal of a body whose structure is broken.
func notJSON() error { return fault.Errorf(fault.ECodeMalformed, "the body is not valid JSON") }

// next skips white space and returns the next byte, or 0 at the end.
func (sc *keyScanner) next() byte {
	for sc.pos < len(sc.data) {
		switch c := sc.data[sc.pos]; c {
		case ' ', '\t', '\r', '\n':
			sc.pos++
		default:
			return c
		}
	}
	return 0
}

// value checks the value at the position, which is to decode into type t
// as member key of the object at field path parent (the path is named in a
// refusal, as in "manifest_envelope.action"; it is built only for a value
// with keys of its own).
func (sc *keyScanner) value(t reflect.Type, parent string, key []byte) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	path := func() string {
		switch {
		case parent == "":
			return string(key)
		case key == nil: // an element of the array at parent
			return parent
		}
		return parent + "." + string(key)
	}
	switch c := sc.next(); {
	case c == '{' && t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalerType):
		return sc.object(t, path())
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && !reflect.PointerTo(t).Implements(unmarshalerType):
		sc.pos++
		parent, key = path(), nil
		for first := true; ; first = false {
			if sc.next() == ']' && first {
				sc.pos++
				return nil
			}
			if err := sc.value(t.Elem(), parent, key); err != nil {
				return err
			}
			if done, err := sc.separator(']'); done || err != nil {
				return err
			}
		}
	default:
		return sc.skip()
	}
}

// object checks the object at the position against the fields of struct t.
func (sc *keyScanner) object(t reflect.Type, path string) error {
	fields := jsonFields(t)
	var room [32][]byte // a struct has few fields, and every key is one
	seen := room[:0]
	sc.pos++
	if sc.next() == '}' {
		sc.pos++
		return nil
	}
	for {
		if sc.next() != '"' {
			return notJSON()
		}
		key, err := sc.key()
		if err != nil {
			return err
		}
		valueType, known := fields[string(key)]
		if !known || slices.ContainsFunc(seen, func(k []byte) bool { return bytes.Equal(k, key) }) {
			field := string(key)
			if path != "" {
				field = path + "." + field
			}
			if known {
				return fault.FieldErrorf(fault.ECodeMalformed, field, "%s appears more than once", field)
			}
			return fault.FieldErrorf(fault.ECodeMalformed, field, "unknown field %q", field)
		}
		seen = append(seen, key)
		if sc.next() != ':' {
			return notJSON()
		}
		sc.pos++
		if err := sc.value(valueType, path, key); err != nil {
			return err
		}
		if done, err := sc.separator('}'); done || err != nil {
			return err
		}
	}
}

// separator reads the comma between two members or elements (false), or
// the closing delimiter close (true).
func (sc *keyScanner) separator(close byte) (done bool, err error) {
	switch sc.next() {
	case ',':
		sc.pos++
		return false, nil
	case close:
		sc.pos++
		return true, nil
	}
	return false, notJSON()
}

// key reads the string at the position as the decoder would name it: its
// escapes resolved (a key with none, the common case, is the body's bytes).
func (sc *keyScanner) key() ([]byte, error) {
	start := sc.pos
	escaped, err := sc.str()
	if err != nil {
		return nil, err
	}
	raw := sc.data[start:sc.pos]
	if !escaped {
		return raw[1 : len(raw)-1], nil
	}
	var key string
	if json.Unmarshal(raw, &key) != nil {
		return nil, notJSON()
	}
	return []byte(key), nil
}

// str steps over the string whose opening quote is at the position, and
// reports whether it holds an escape.
func (sc *keyScanner) str() (escaped bool, err error) {
	for i := sc.pos + 1; i < len(sc.data); i++ {
		switch sc.data[i] {
		case '\\':
			escaped = true
			i++ // the escaped byte cannot close the string
		case '"':
			sc.pos = i + 1
			return escaped, nil
		}
	}
	return false, notJSON()
}

// skip steps over the value at the position, however deeply nested, with a
// count of open brackets rather than recursion; brackets inside strings do
// not count.
func (sc *keyScanner) skip() error {
	depth := 0
	for {
		switch c := sc.next(); c {
		case 0:
			return notJSON()
		case '"':
			if _, err := sc.str(); err != nil {
				return err
			}
		case '{', '[':
			depth++
			sc.pos++
			continue
		case '}', ']':
			if depth == 0 {
				return notJSON()
			}
			depth--
			sc.pos++
		case ',', ':':
			if depth == 0 {
				return notJSON()
			}
			sc.pos++
			continue
		default:
			if !sc.scalar() {
				return notJSON()
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// scalar steps over a number or literal (true, false, null) at the
// position: the bytes it may hold, checked for what they spell by the
// decode that follows.
func (sc *keyScanner) scalar() bool {
	start := sc.pos
	for sc.pos < len(sc.data) {
		c := sc.data[sc.pos]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E') {
			break
		}
		sc.pos++
	}
	return sc.pos > start
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

// decodeBase64Field decodes a body field's standard base64 (with padding),
// accepting only the canonical text of the bytes: Go's decoder, even in
// strict mode, skips carriage returns and newlines, so a text holding them
// would stand for the same bytes as the text without, and the decoded
// length's own encoding is the one text accepted.
func decodeBase64Field(s string) ([]byte, error) {
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, err
	}
	if base64.StdEncoding.EncodedLen(len(raw)) != len(s) {
		return nil, errors.New("base64 text holds a line break")
	}
	return raw, nil
}
