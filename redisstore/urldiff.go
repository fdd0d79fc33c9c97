package redisstore

import (
	"reflect"
	"slices"
	"strings"
)

// URLDifference names the parts in which two store URLs differ as go-redis
// reads them ("" when they mean the same server and options: no DB and
// /0 alike, options in any order): "scheme", "user or password", "host",
// "db", "options", joined by ", "; "url" when either does not parse. It
// never quotes a URL, which may hold a password.
func URLDifference(a, b string, cluster bool) string {
	pa, errA := parseParts(a, cluster)
	pb, errB := parseParts(b, cluster)
	switch {
	case errA == nil && errB == nil:
	case a == b:
		return ""
	default:
		return "url"
	}
	var parts []string
	add := func(differ bool, part string) {
		if differ {
			parts = append(parts, part)
		}
	}
	add(pa.tls != pb.tls, "scheme")
	add(pa.credentials != pb.credentials, "user or password")
	add(pa.host != pb.host, "host")
	add(pa.db != pb.db, "db")
	add(!reflect.DeepEqual(pa.options, pb.options), "options")
	return strings.Join(parts, ", ")
}

// urlParts is a store URL as go-redis reads it, in the parts
// URLDifference names.
type urlParts struct {
	tls         bool
	credentials string
	host        string // a cluster's nodes, sorted
	db          int
	options     any // the rest of go-redis's options
}

// parseParts parses raw into its urlParts.
func parseParts(raw string, cluster bool) (urlParts, error) {
	if cluster {
		o, err := parseClusterURL(raw)
		if err != nil {
			return urlParts{}, err
		}
		p := urlParts{tls: o.TLSConfig != nil, credentials: o.Username + ":" + o.Password, host: strings.Join(slices.Sorted(slices.Values(o.Addrs)), ",")}
		o.TLSConfig, o.Username, o.Password, o.Addrs = nil, "", "", nil
		p.options = *o
		return p, nil
	}
	o, err := parseURL(raw)
	if err != nil {
		return urlParts{}, err
	}
	p := urlParts{tls: o.TLSConfig != nil, credentials: o.Username + ":" + o.Password, host: o.Addr, db: o.DB}
	o.TLSConfig, o.Username, o.Password, o.Addr, o.DB = nil, "", "", "", 0
	p.options = *o
	return p, nil
}
