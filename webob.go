package mcplimit

// WebOb (Pyramid's request object) reads request cookies by running one
// pattern over the whole Cookie header's bytes and taking every match:
//
//	(L+?)\s*=\s*("(?:\\"|.)*?"|\w{3},\s[\w\d-]{9,11}\s[\d:]{8}\sGMT|(?:L|\\(?:[0-3][0-7][0-7]|.))*)
//
// where L is a byte it allows in names and unquoted values. A pair may so
// start after any byte outside L, inside another cookie's value too
// (`x=a"sid=v` holds the cookie sid). webobPairs finds the same pairs in
// linear time, where a regular expression takes time quadratic in a run
// of L bytes that no '=' follows.

// webobLegal reports whether WebOb allows c in a name or unquoted value:
// ASCII letters, digits and ~!@#$%^&*()_+=-`.?|:/{}<>'.
func webobLegal(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c < 0x80 && webobSpecial[c]
}

// webobSpecial marks the punctuation webobLegal allows.
var webobSpecial = func() (t [0x80]bool) {
	for _, c := range []byte("~!@#$%^&*()_+=-`.?|:/{}<>'") {
		t[c] = true
	}
	return t
}()

// webobSpace reports whether c is whitespace to Python's bytes patterns.
func webobSpace(c byte) bool {
	return c == ' ' || '\t' <= c && c <= '\r'
}

// webobPairs calls pair with the name of every cookie WebOb reads in
// line and the offset just past that name.
func webobPairs(line string, pair func(name string, end int)) {
	for p := 0; p < len(line); {
		if !webobLegal(line[p]) {
			p++
			continue
		}
		// The name is the shortest run of legal bytes from p that
		// `\s*=` follows: up to the run's first '=' after p, or the
		// whole run when spaces and an '=' follow it.
		runEnd := p + 1
		for runEnd < len(line) && webobLegal(line[runEnd]) && line[runEnd] != '=' {
			runEnd++
		}
		eq := runEnd
		if eq < len(line) && line[eq] != '=' {
			for eq < len(line) && webobSpace(line[eq]) {
				eq++
			}
		}
		if eq >= len(line) || line[eq] != '=' {
			// No start in this run can match: skip it.
			p = runEnd
			continue
		}
		pair(line[p:runEnd], runEnd)
		v := eq + 1
		for v < len(line) && webobSpace(line[v]) {
			v++
		}
		p = webobValueEnd(line, v)
	}
}

// webobValueEnd returns the end of the value WebOb's pattern matches at
// i: a quoted string, an expiry date, or a run of legal bytes and
// backslash escapes (maybe empty).
func webobValueEnd(line string, i int) int {
	if end, ok := webobQuoted(line, i); ok {
		return end
	}
	if end, ok := webobDate(line, i); ok {
		return end
	}
	for i < len(line) {
		switch c := line[i]; {
		case webobLegal(c):
			i++
		case c == '\\' && i+1 < len(line) && line[i+1] != '\n':
			i += 2
		default:
			return i
		}
	}
	return i
}

// webobQuoted matches `"(?:\\"|.)*?"` at i as a backtracking engine
// does: it ends at the first '"' not taken by a `\"` pair, or, when there
// is none before a newline or the end, at the quote of the last `\"` pair
// (taking its backslash alone instead).
func webobQuoted(line string, i int) (int, bool) {
	if i >= len(line) || line[i] != '"' {
		return 0, false
	}
	lastPair := -1
	for j := i + 1; j < len(line) && line[j] != '\n'; {
		switch {
		case line[j] == '"':
			return j + 1, true
		case line[j] == '\\' && j+1 < len(line) && line[j+1] == '"':
			lastPair = j + 1
			j += 2
		default:
			j++
		}
	}
	if lastPair >= 0 {
		return lastPair + 1, true
	}
	return 0, false
}

// webobDate matches `\w{3},\s[\w\d-]{9,11}\s[\d:]{8}\sGMT` at i.
func webobDate(line string, i int) (int, bool) {
	word := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
	}
	j := i
	for k := 0; k < 3; k++ {
		if j >= len(line) || !word(line[j]) {
			return 0, false
		}
		j++
	}
	if j+1 >= len(line) || line[j] != ',' || !webobSpace(line[j+1]) {
		return 0, false
	}
	j += 2
	n := 0
	for j < len(line) && n < 11 && (word(line[j]) || line[j] == '-') {
		j++
		n++
	}
	if n < 9 || j >= len(line) || !webobSpace(line[j]) {
		return 0, false
	}
	j++
	for k := 0; k < 8; k++ {
		if j >= len(line) || !(line[j] == ':' || '0' <= line[j] && line[j] <= '9') {
			return 0, false
		}
		j++
	}
	if j+3 >= len(line) || !webobSpace(line[j]) || line[j+1:j+4] != "GMT" {
		return 0, false
	}
	return j + 4, true
}
