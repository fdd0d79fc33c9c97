package mcplimit

import (
	"bytes"
	"encoding/json"
	"fmt"
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
// whose value is null with an error naming it and saying nullErr. A null
// object is a nil map.
func decodeNonNull[V any](b []byte, nullErr string) (map[string]V, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return nil, err
	}
	m := make(map[string]V, len(raw))
	for name, v := range raw {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil, fmt.Errorf("%s: %s", name, nullErr)
		}
		var x V
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		m[name] = x
	}
	return m, nil
}
