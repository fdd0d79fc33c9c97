package jsonrpc

import (
	"slices"
	"strings"
)

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

// serverMethods are the methods MCP defines for a server to send, up to
// revision 2025-11-25, that no client sends.
var serverMethods = []string{
	"sampling/createMessage",
	"roots/list",
	"elicitation/create",
	"notifications/message",
	"notifications/resources/updated",
	"notifications/resources/list_changed",
	"notifications/tools/list_changed",
	"notifications/prompts/list_changed",
	"notifications/elicitation/complete",
}

// ClientMethod reports whether MCP defines m for a client to send. Method
// names are case-sensitive.
func ClientMethod(m string) bool {
	return slices.Contains(clientMethods, m)
}

// Misspelling returns the client method m is likely a misspelling of, if
// m is no MCP method itself (a client's or a server's): a method that m
// is at most one edit per five characters of the method away from (two
// for tools/call, none for ping), letters compared in any case and edits
// counted in characters (an invisible one, or a look-alike from another
// script, is one).
func Misspelling(m string) (string, bool) {
	if ClientMethod(m) || slices.Contains(serverMethods, m) {
		return "", false
	}
	for _, x := range clientMethods {
		if strings.EqualFold(m, x) || editDistance(strings.ToLower(m), strings.ToLower(x)) <= len(x)/5 {
			return x, true
		}
	}
	return "", false
}

// editDistance is the Levenshtein distance between a and b, in
// characters.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	row := make([]int, len(rb)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			diag, row[j] = row[j], min(row[j]+1, row[j-1]+1, diag+cost)
		}
	}
	return row[len(rb)]
}
