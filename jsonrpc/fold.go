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
			return foldRunes(s[i:], t[i:], false)
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

// runesFold reports whether sr and tr are equal under simple Unicode case
// folding.
func runesFold(sr, tr rune) bool {
	if sr == tr {
		return true
	}
	if tr < sr {
		sr, tr = tr, sr
	}
	if tr < utf8.RuneSelf {
		return 'A' <= sr && sr <= 'Z' && tr == sr+'a'-'A'
	}
	// General case: walk sr's fold orbit up to tr.
	r := unicode.SimpleFold(sr)
	for r != sr && r < tr {
		r = unicode.SimpleFold(r)
	}
	return r == tr
}

// hasSeparator reports whether k holds a dash or an underscore.
func hasSeparator(k []byte) bool {
	for _, c := range k {
		if c == '_' || c == '-' {
			return true
		}
	}
	return false
}

// equalFoldUnseparated reports whether s and t are equal under equalFold
// once their dashes and underscores are removed: how encoding/json/v2
// matches names with MatchCaseInsensitiveNames or a case:ignore tag, where
// me_thod is method and li-mit is limit.
func equalFoldUnseparated(s []byte, t string) bool {
	return foldRunes(s, t, true)
}

// foldRunes compares s and t rune by rune under simple Unicode case
// folding, leaving out dashes and underscores when unseparated.
func foldRunes(s []byte, t string, unseparated bool) bool {
	for {
		for unseparated && len(s) > 0 && (s[0] == '_' || s[0] == '-') {
			s = s[1:]
		}
		for unseparated && len(t) > 0 && (t[0] == '_' || t[0] == '-') {
			t = t[1:]
		}
		if len(s) == 0 || len(t) == 0 {
			return len(s) == len(t)
		}
		sr, n := utf8.DecodeRune(s)
		s = s[n:]
		tr, m := utf8.DecodeRuneInString(t)
		t = t[m:]
		if !runesFold(sr, tr) {
			return false
		}
	}
}
