package mcplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
)

// ArgBounds maps a tool's argument names to the largest value each may
// take (see ToolPolicy.Args).
type ArgBounds map[string]float64

// UnmarshalJSON reads the bounds, refusing a null one: encoding/json
// would read it as 0, a bound that silently refuses every value but 0.
func (a *ArgBounds) UnmarshalJSON(b []byte) error {
	m, err := decodeNonNull[float64](b, "null is no bound; give a number")
	*a = m
	return err
}

// Costs maps tool names to what one call of each costs (see
// Handler.Costs).
type Costs map[string]int64

// UnmarshalJSON reads the costs, refusing a null one: encoding/json would
// read it as 0, and the check of the costs would then quote a 0 the
// config does not hold.
func (c *Costs) UnmarshalJSON(b []byte) error {
	m, err := decodeNonNull[int64](b, "null is no cost; give a positive integer")
	*c = m
	return err
}

// decodeNonNull decodes the JSON object b into a map, refusing a member
// whose value is null with a memberError saying nullErr. A null object is
// a nil map.
func decodeNonNull[V any](b []byte, nullErr string) (map[string]V, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return nil, err
	}
	m := make(map[string]V, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		v := raw[name]
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, &memberError{key: name, err: errors.New(nullErr)}
		}
		var x V
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, &memberError{key: name, err: err}
		}
		m[name] = x
	}
	return m, nil
}

// memberError says which member of a map that decodes itself has a value
// that does not decode, so that the handler's error names it in the path
// of the field (`costs.slow`), as encoding/json's errors name the members
// of a map it decodes.
type memberError struct {
	key string
	err error
}

// Error says the member's key and what is wrong with its value.
func (e *memberError) Error() string { return e.key + ": " + e.err.Error() }

// Unwrap returns what is wrong with the member's value.
func (e *memberError) Unwrap() error { return e.err }
