package quota

import (
	"fmt"
	"strings"
	"time"
)

// Period is the kind of window a count belongs to: a UTC day or a UTC month.
// The zero value is not a valid Period.
type Period uint8

const (
	// Day is the UTC calendar day, from 00:00 UTC to the next 00:00 UTC.
	Day Period = iota + 1
	// Month is the UTC calendar month, from the 1st 00:00 UTC to the next 1st.
	Month
)

// Valid reports whether p is Day or Month.
func (p Period) Valid() bool { return p == Day || p == Month }

// Start returns the start (UTC) of the period that contains t, or the zero
// time for an invalid Period.
func (p Period) Start(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	switch p {
	case Day:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case Month:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// Next returns the start (UTC) of the period after the one that contains t:
// the next 00:00 UTC for Day, the 1st of the next month 00:00 UTC for Month.
// It is when a quota exhausted at t resets (for a Retry-After header). It
// returns the zero time for an invalid Period.
func (p Period) Next(t time.Time) time.Time {
	switch p {
	case Day: // UTC days are 86400 Unix seconds; no calendar needed
		s := t.Unix()
		day := s / secondsPerDay
		if s%secondsPerDay < 0 {
			day--
		}
		return time.Unix((day+1)*secondsPerDay, 0).UTC()
	case Month:
		y, m, _ := t.UTC().Date()
		return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

const secondsPerDay = 24 * 60 * 60

// prev returns the start of the period before the one starting at start.
func (p Period) prev(start time.Time) time.Time {
	return p.Start(start.Add(-time.Nanosecond))
}

// ID returns the identifier of the period that contains t: "2026-11-30" for
// Day, "2026-11" for Month, "" for an invalid Period.
func (p Period) ID(t time.Time) string {
	switch p {
	case Day:
		return p.Start(t).Format(time.DateOnly)
	case Month:
		return p.Start(t).Format(monthLayout)
	}
	return ""
}

const monthLayout = "2006-01"

// String returns "day" or "month".
func (p Period) String() string {
	switch p {
	case Day:
		return "day"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Period(%d)", uint8(p))
}

// ParsePeriod parses "day" or "month" (case-insensitive).
func ParsePeriod(s string) (Period, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "day":
		return Day, nil
	case "month":
		return Month, nil
	}
	return 0, fmt.Errorf("quota: unknown period %q (want day or month)", s)
}

// MarshalText encodes p as "day" or "month".
func (p Period) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("quota: invalid period %d", uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText decodes "day" or "month", as ParsePeriod does.
func (p *Period) UnmarshalText(b []byte) error {
	v, err := ParsePeriod(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// objectName returns the storage object name of the period of kind p that
// starts at start, e.g. "day-2026-11-30" or "month-2026-11".
func objectName(p Period, start time.Time) string {
	return p.String() + "-" + p.ID(start)
}

// parseObjectName is the inverse of objectName. It reports false for any
// name it did not write (temporary files, junk).
func parseObjectName(name string) (Period, time.Time, bool) {
	var (
		p      Period
		layout string
	)
	rest, ok := strings.CutPrefix(name, "day-")
	if ok {
		p, layout = Day, time.DateOnly
	} else if rest, ok = strings.CutPrefix(name, "month-"); ok {
		p, layout = Month, monthLayout
	} else {
		return 0, time.Time{}, false
	}
	t, err := time.Parse(layout, rest)
	if err != nil || p.ID(t) != rest {
		return 0, time.Time{}, false
	}
	return p, t, true
}
