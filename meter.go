package mcplimit

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

// compileMeter compiles the meter list. It refuses what would leave the
// calls meant uncharged without a word: "off" (meter has none), a close
// misspelling of an MCP client method, and a name holding a character no
// method has, which a log line shows as if it were not there.
func compileMeter(p *policy, meter []string) error {
	if len(meter) == 0 {
		p.meter = jsonrpc.Meter{Methods: []string{"tools/call"}}
		return nil
	}
	for i, m := range meter {
		if slices.Contains(meter[:i], m) {
			return fmt.Errorf("meter %q: listed twice", m)
		}
		if m == "" {
			return fmt.Errorf("meter: empty method name")
		}
		if i := strings.IndexFunc(m, unseen); i >= 0 {
			r, _ := utf8.DecodeRuneInString(m[i:])
			return fmt.Errorf("meter: %q holds a space, an invisible character or a byte that is not UTF-8 (%U at byte %d): no MCP method does", m, r, i)
		}
		if strings.EqualFold(m, "off") {
			return fmt.Errorf("meter: %q is not a method: meter lists the methods that cost, or is * (every request costs 1); a layer is turned off on its own (tenant off, quota off, global off)", m)
		}
		if near, ok := jsonrpc.Misspelling(m); ok {
			return fmt.Errorf("meter: %q is not an MCP method: did you mean %q? (method names are case-sensitive; a method no client sends is never charged)", m, near)
		}
		if m == "*" {
			if len(meter) > 1 {
				return fmt.Errorf("meter: * cannot be combined with method names")
			}
			p.meter = jsonrpc.Meter{All: true}
			return nil
		}
	}
	p.meter = jsonrpc.Meter{Methods: slices.Clone(meter)}
	return nil
}
