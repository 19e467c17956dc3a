package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"sealbox/kv/fault"
)

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
