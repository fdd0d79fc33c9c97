package mcplimit

import (
	"slices"
	"strings"
)

// caddyHTTPPlaceholder reports whether the placeholder key is one that
// Caddy's HTTP server answers itself for every request (caddyhttp's
// replacer): one of the request's own, {http.vars.*},
// {http.response.header.*} or the shutdown ones. Any other under http.
// is set by a handler (an auth handler's {http.auth.user.*}, a matcher's
// {http.regexp.*}, a plugin's) or is a typo ({http.request.headers.X} for
// {http.request.header.X}), empty unless a handler sets it.
func caddyHTTPPlaceholder(key string) bool {
	if rest, ok := strings.CutPrefix(key, "http.request."); ok {
		return slices.Contains(requestPlaceholders, rest) || hasPrefixIn(rest, requestPlaceholderPrefixes)
	}
	return hasPrefixIn(key, []string{"http.vars.", "http.response.header."}) ||
		key == "http.shutting_down" || key == "http.time_until_shutdown"
}

// requestPlaceholders are the names, after "http.request.", of the
// request placeholders caddyhttp's replacer answers (Caddy v2.11.9).
var requestPlaceholders = []string{
	"method", "scheme", "proto", "proto_name", "host", "port", "hostport",
	"local", "local.host", "local.port", "remote", "remote.host", "remote.port",
	"uri", "uri_escaped", "uri.path", "uri.path_escaped", "uri.query", "uri.query_escaped", "uri.prefixed_query",
	"duration", "duration_ms", "uuid", "body", "body_base64",
	"orig_method", "orig_uri", "orig_uri.path", "orig_uri.query", "orig_uri.prefixed_query",
}

// requestPlaceholderPrefixes are the prefixes, after "http.request.", of
// the request placeholders caddyhttp's replacer answers by the rest of
// their name: a header, a cookie, a query parameter, a TLS field, a path
// segment or file part, a host label, an address prefix.
var requestPlaceholderPrefixes = []string{
	"header.", "cookie.", "uri.query.", "tls.", "uri.path.", "orig_uri.path.", "host.labels.", "remote.host/",
}
