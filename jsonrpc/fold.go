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
			return foldRunes(s[i:], t[i:], 0)
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
	return foldRunes(s, t, foldUnseparated)
}

// Modes of foldRunes.
const (
	foldUnseparated = 1 << iota // dashes and underscores left out
	foldDotted                  // İ and ı in s read as i (see equalFoldArg)
)

// equalFoldArg reports whether the argument key s matches the argument
// name t under equalFoldUnseparated, or once each İ (U+0130) and ı
// (U+0131) in s is read as i: parsers that match keys by lower-casing
// them (bytedance/sonic) or upper-casing them (.NET's
// OrdinalIgnoreCase) read lİmit and lımit as limit, which simple case
// folding does not. Those are the only two runes that lower- or
// upper-case to ASCII outside their fold orbit.
func equalFoldArg(s []byte, t string) bool {
	return foldRunes(s, t, foldUnseparated|foldDotted)
}

// foldRunes compares s and t rune by rune under simple Unicode case
// folding, in the given mode.
func foldRunes(s []byte, t string, mode uint8) bool {
	unseparated := mode&foldUnseparated != 0
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
		if mode&foldDotted != 0 && (sr == '\u0130' || sr == '\u0131') {
			sr = 'i'
		}
		if !runesFold(sr, tr) {
			return false
		}
	}
}
