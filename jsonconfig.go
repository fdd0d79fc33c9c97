package mcplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// UnmarshalJSON decodes the handler's JSON config as Caddy decodes a
// module's (an unknown field is an error), and names the field of a value
// that does not decode: encoding/json names only a value of the wrong JSON
// type, and that without the index or key of the tier, override or tool
// it is in, so `"known_ttl":"abc"` would fail as `time: invalid duration
// "abc"` and a misspelt field of `store` as `unknown field "timeot"`,
// whichever of the config's fields they are in.
func (h *Handler) UnmarshalJSON(b []byte) error {
	type handlerFields Handler // the same fields, without this method
	err := caddy.StrictUnmarshalJSON(b, (*handlerFields)(h))
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	isTypeErr := errors.As(err, &typeErr) && typeErr.Field != ""
	path := badField(b, reflect.TypeFor[Handler]())
	if me := (*memberError)(nil); path != "" && errors.As(err, &me) {
		path, err = path+"."+me.key, me.err
	}
	switch {
	case path == "":
		if isTypeErr && typeErr.Struct == "handlerFields" {
			typeErr.Struct = "Handler"
		}
		return err
	case isTypeErr:
		// Its field path has no index or key (tiers.tenant.burst, of
		// which tier?) and names an embedded struct as a field.
		return fmt.Errorf("%s: json: cannot unmarshal %s into a value of type %s", path, typeErr.Value, typeErr.Type)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// badField returns the path in b, the JSON of a value of type t, of the
// innermost member or element whose value does not decode alone
// (`store.redis.timeout`, `tiers[1].tenant`), or "" when b itself is that value.
func badField(b []byte, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) && t != reflect.TypeFor[Handler]() {
		return "" // it decodes itself, and says what failed inside
	}
	switch t.Kind() {
	case reflect.Struct:
		var members map[string]json.RawMessage
		if json.Unmarshal(b, &members) != nil {
			return ""
		}
		return badMember(members, t)
	case reflect.Slice, reflect.Array:
		var elems []json.RawMessage
		if json.Unmarshal(b, &elems) != nil {
			return ""
		}
		for i, raw := range elems {
			if path, bad := decodesAlone(raw, t.Elem()); bad {
				return join(fmt.Sprintf("[%d]", i), path)
			}
		}
	case reflect.Map:
		var members map[string]json.RawMessage
		if json.Unmarshal(b, &members) != nil {
			return ""
		}
		for _, k := range slices.Sorted(maps.Keys(members)) {
			if path, bad := decodesAlone(members[k], t.Elem()); bad {
				return join(k, path)
			}
		}
	}
	return ""
}

// badMember is badField for the members of an object of the struct type
// t, whose embedded structs' fields are its own.
func badMember(members map[string]json.RawMessage, t reflect.Type) string {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			if path := badMember(members, f.Type); path != "" {
				return path
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		if raw, ok := member(members, name); ok && f.IsExported() && name != "-" {
			if path, bad := decodesAlone(raw, f.Type); bad {
				return join(name, path)
			}
		}
	}
	return ""
}

// decodesAlone decodes raw into a new value of type t, and when that fails
// reports so with the path inside raw of what failed (see badField).
func decodesAlone(raw json.RawMessage, t reflect.Type) (path string, bad bool) {
	if caddy.StrictUnmarshalJSON(raw, reflect.New(t).Interface()) == nil {
		return "", false
	}
	return badField(raw, t), true
}

// member finds the member of an object that encoding/json decodes into
// the field name: the one spelt so, or else one spelt so in another case.
func member(members map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	if raw, ok := members[name]; ok {
		return raw, true
	}
	for _, k := range slices.Sorted(maps.Keys(members)) {
		if strings.EqualFold(k, name) {
			return members[k], true
		}
	}
	return nil, false
}

// join appends path, the path inside a member or element, to the name or
// [index] that leads to it.
func join(name, path string) string {
	switch {
	case path == "":
		return name
	case strings.HasPrefix(path, "["):
		return name + path
	}
	return name + "." + path
}
