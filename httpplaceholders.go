package mcplimit

import (
	"slices"
	"strconv"
	"strings"
)

// caddyHTTPPlaceholder reports whether the placeholder key is one that
// Caddy's HTTP server answers itself for every request (caddyhttp's
// replacer): one of the request's own, {http.vars.*},
// {http.response.header.*} or the shutdown ones. Any other under http.
// is set by a handler (an auth handler's {http.auth.user.*}, a matcher's
// {http.regexp.*}, a plugin's) or is a typo ({http.request.headers.X} for
// {http.request.header.X}, {http.request.tls.client.fingerprints}),
// empty unless a handler sets it.
func caddyHTTPPlaceholder(key string) bool {
	if rest, ok := strings.CutPrefix(key, "http.request."); ok {
		return slices.Contains(requestPlaceholders, rest) || hasPrefixIn(rest, requestPlaceholderPrefixes) ||
			indexed(rest, "host.labels.") || indexed(rest, "uri.path.") || indexed(rest, "orig_uri.path.") ||
			remotePrefix(rest) || tlsPlaceholder(rest)
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
	"uri.path.file", "uri.path.dir", "uri.path.file.base", "uri.path.file.ext",
	"duration", "duration_ms", "uuid", "body", "body_base64",
	"orig_method", "orig_uri", "orig_uri.path", "orig_uri.query", "orig_uri.prefixed_query",
	"orig_uri.path.file", "orig_uri.path.file_escaped", "orig_uri.path.dir",
}

// requestPlaceholderPrefixes are the prefixes, after "http.request.", of
// the request placeholders caddyhttp's replacer answers by whatever
// follows: a header, a cookie, a query parameter.
var requestPlaceholderPrefixes = []string{"header.", "cookie.", "uri.query."}

// indexed reports whether name is prefix followed by a number the
// replacer reads as an index (a host label, a path segment).
func indexed(name, prefix string) bool {
	idx, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	n, err := strconv.Atoi(idx)
	return err == nil && n >= 0
}

// remotePrefix reports whether name is remote.host/<v4 bits>[,<v6 bits>],
// the client address's prefix; with bits the replacer cannot read, it is
// empty for every request.
func remotePrefix(name string) bool {
	bits, ok := strings.CutPrefix(name, "remote.host/")
	if !ok {
		return false
	}
	for b := range strings.SplitSeq(bits, ",") {
		if n, err := strconv.Atoi(b); err != nil || n < 0 || n > 128 {
			return false
		}
	}
	return strings.Count(bits, ",") <= 1
}

// tlsPlaceholder reports whether name is a TLS field the replacer answers
// (in any case, as it reads them): one of tlsFields, or a client
// certificate's list of names, whole or one of them by index.
func tlsPlaceholder(name string) bool {
	field, ok := strings.CutPrefix(strings.ToLower(name), "tls.")
	if !ok {
		return false
	}
	if slices.Contains(tlsFields, field) {
		return true
	}
	for _, list := range []string{"client.san.dns_names", "client.san.emails", "client.san.ips", "client.san.uris"} {
		if field == list || indexed(field, list+".") {
			return true
		}
	}
	return false
}

// tlsFields are the TLS fields, after "http.request.tls.", that
// caddyhttp's replacer answers by name.
var tlsFields = []string{
	"version", "cipher_suite", "resumed", "proto", "proto_mutual", "server_name", "ech",
	"client.fingerprint", "client.public_key", "client.public_key_sha256", "client.issuer", "client.serial",
	"client.subject", "client.certificate_pem", "client.certificate_der_base64",
}
