package jsonrpc

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
)

// maxParsedDigits bounds the significant digits numberValue hands to
// strconv.ParseFloat: those of every double's halfway points (767) and
// some, followed by one that stands for the nonzero digits cut off, so
// the rounding is the one the whole number gets.
const maxParsedDigits = 780

// numberValue returns the value of raw, a JSON number, rounded to the
// nearest double as JavaScript and Python read it (±Inf past the largest).
// strconv.ParseFloat misreads a number whose integer part has more than
// 800 digits: it drops the digits past the 800th without moving the
// decimal point, so `1` followed by 900 zeros and `e-894` reads as 1e-95
// instead of 1e6, and an `arg` bound would be compared with a value no
// other reader sees. Such a number is first brought to its significant
// digits and an exponent.
func numberValue(raw []byte) float64 {
	if len(raw) <= 800 {
		f, _ := strconv.ParseFloat(string(raw), 64)
		return f
	}
	neg := raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	mant, exp := raw, []byte(nil)
	if i := bytes.IndexAny(raw, "eE"); i >= 0 {
		mant, exp = raw[:i], raw[i+1:]
	}
	intPart, frac := mant, []byte(nil)
	if i := bytes.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	digits := append(append(make([]byte, 0, len(intPart)+len(frac)), intPart...), frac...)
	point := len(intPart) // the value is 0.digits × 10^(point+exp)
	lead := len(digits) - len(bytes.TrimLeft(digits, "0"))
	digits, point = bytes.TrimRight(digits[lead:], "0"), point-lead
	if len(digits) == 0 {
		return signed(0, neg)
	}
	e, huge := exponent(exp)
	switch {
	case huge > 0:
		return signed(math.Inf(1), neg)
	case huge < 0:
		return signed(0, neg)
	}
	if len(digits) > maxParsedDigits+1 {
		digits = append(digits[:maxParsedDigits], '1')
	}
	s := make([]byte, 0, len(digits)+24)
	s = append(s, "0."...)
	s = append(s, digits...)
	s = append(s, 'e')
	s = strconv.AppendInt(s, int64(point)+e, 10)
	f, _ := strconv.ParseFloat(string(s), 64)
	return signed(f, neg)
}

func signed(f float64, neg bool) float64 {
	if neg {
		return -f
	}
	return f
}

// exponent reads the exponent of a JSON number (digits, with an optional
// sign). One of more than 15 digits is past any that can matter: huge is
// then +1 or -1, the direction the value goes (to Inf, or to 0).
func exponent(b []byte) (e int64, huge int) {
	if len(b) == 0 {
		return 0, 0
	}
	neg := b[0] == '-'
	digits := bytes.TrimLeft(bytes.TrimLeft(b, "+-"), "0")
	if len(digits) > 15 {
		if neg {
			return 0, -1
		}
		return 0, 1
	}
	e, _ = strconv.ParseInt(string(b), 10, 64) // "+007" and "-0" included
	return e, 0
}

// integerCeiling returns f, the double nearest to raw, a JSON number, or
// when raw is an integer literal (no fraction, no exponent) above f, the
// next double up. Python's json, pydantic and Go's integer fields read
// such a literal exactly: 9007199254740993 is 2^53+1 to them, 2^53 as a
// double. Rounded up, it exceeds a bound exactly when the integer does,
// since the bound in force is itself a double.
func integerCeiling(raw []byte, f float64) float64 {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) <= 15 || math.IsInf(f, 0) || bytes.ContainsAny(digits, ".eE") {
		return f // exact as a double, or no integer reader
	}
	exact, ok := new(big.Int).SetString(string(raw), 10)
	if !ok {
		return f
	}
	nearest, _ := new(big.Float).SetFloat64(f).Int(nil)
	if exact.Cmp(nearest) > 0 {
		return math.Nextafter(f, math.Inf(1))
	}
	return f
}
