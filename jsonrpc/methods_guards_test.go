package jsonrpc

import "testing"

// A method equal to a client method under Unicode case folding (the long
// s folds to s) is a misspelling of it, however many such letters it has.
func TestMisspellingUnderCaseFolding(t *testing.T) {
	if got, ok := Misspelling("ta\u017fk\u017f/li\u017ft"); !ok || got != "tasks/list" {
		t.Errorf("Misspelling = %q, %v; want tasks/list", got, ok)
	}
}
