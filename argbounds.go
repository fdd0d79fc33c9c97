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
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*a = nil
		return nil
	}
	m := make(ArgBounds, len(raw))
	for name, v := range raw {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return fmt.Errorf("%s: null is no bound; give a number", name)
		}
		var f float64
		if err := json.Unmarshal(v, &f); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		m[name] = f
	}
	*a = m
	return nil
}
