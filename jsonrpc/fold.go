package jsonrpc

import (
	"unicode"
	"unicode/utf8"
)

// equalFold reports whether s and t are equal under simple Unicode case
// folding, exactly like strings.EqualFold(string(s), t), which is also how
// encoding/json matches object keys to struct fields. It does not allocate.
func equalFold(s []byte, t string) bool {
	i := 0
	for ; i < len(s) && i < len(t); i++ {
		sr, tr := s[i], t[i]
		if sr|tr >= utf8.RuneSelf {
			return equalFoldUnicode(s[i:], t[i:])
		}
		if sr == tr {
			continue
		}
		if tr < sr {
			sr, tr = tr, sr
		}
		if 'A' <= sr && sr <= 'Z' && tr == sr+'a'-'A' {
			continue
		}
		return false
	}
	return len(s) == len(t)
}

func equalFoldUnicode(s []byte, t string) bool {
	for len(s) > 0 && len(t) > 0 {
		sr, n := utf8.DecodeRune(s)
		s = s[n:]
		tr, m := utf8.DecodeRuneInString(t)
		t = t[m:]
		if sr == tr {
			continue
		}
		if tr < sr {
			sr, tr = tr, sr
		}
		if tr < utf8.RuneSelf {
			if 'A' <= sr && sr <= 'Z' && tr == sr+'a'-'A' {
				continue
			}
			return false
		}
		// General case: walk sr's fold orbit up to tr.
		r := unicode.SimpleFold(sr)
		for r != sr && r < tr {
			r = unicode.SimpleFold(r)
		}
		if r == tr {
			continue
		}
		return false
	}
	return len(s) == len(t)
}
