package jsonrpc

import "strings"

// clientMethods are the methods MCP defines for a client to send, requests
// and notifications, up to revision 2025-11-25.
var clientMethods = []string{
	"initialize",
	"ping",
	"completion/complete",
	"logging/setLevel",
	"prompts/get",
	"prompts/list",
	"resources/list",
	"resources/templates/list",
	"resources/read",
	"resources/subscribe",
	"resources/unsubscribe",
	ToolsCall,
	"tools/list",
	"tasks/get",
	"tasks/result",
	"tasks/list",
	"tasks/cancel",
	"notifications/initialized",
	"notifications/cancelled",
	"notifications/progress",
	"notifications/roots/list_changed",
	"notifications/tasks/status",
}

// ClientMethod reports whether MCP defines m for a client to send. Method
// names are case-sensitive.
func ClientMethod(m string) bool {
	for _, x := range clientMethods {
		if m == x {
			return true
		}
	}
	return false
}

// Misspelling returns the client method m is likely a misspelling of, if
// m is not one itself: a method that m spells in other case, or that it
// is at most one edit per five characters of the method away from (two
// for tools/call, none for ping).
func Misspelling(m string) (string, bool) {
	if ClientMethod(m) {
		return "", false
	}
	for _, x := range clientMethods {
		if strings.EqualFold(m, x) || editDistance(m, x) <= len(x)/5 {
			return x, true
		}
	}
	return "", false
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			diag, row[j] = row[j], min(row[j]+1, row[j-1]+1, diag+cost)
		}
	}
	return row[len(b)]
}
