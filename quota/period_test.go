package quota

import (
	"testing"
	"time"
)

func TestPeriodBoundaries(t *testing.T) {
	est := time.FixedZone("EST", -5*3600)
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		rule      string
		p         Period
		at        time.Time
		wantStart string
		wantNext  string
		wantID    string
	}{
		{"day: midday", Day, utc("2026-11-30T12:00:00Z"), "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z", "2026-11-30"},
		{"day: last second before midnight", Day, utc("2026-11-30T23:59:59.999Z"), "2026-11-30T00:00:00Z", "2026-12-01T00:00:00Z", "2026-11-30"},
		{"day: midnight starts the new day", Day, utc("2026-12-01T00:00:00Z"), "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", "2026-12-01"},
		{"day: year end", Day, utc("2026-12-31T23:59:59Z"), "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z", "2026-12-31"},
		{"day: leap day", Day, utc("2028-02-29T10:00:00Z"), "2028-02-29T00:00:00Z", "2028-03-01T00:00:00Z", "2028-02-29"},
		{"day: before 1970", Day, utc("1969-12-31T12:00:00Z"), "1969-12-31T00:00:00Z", "1970-01-01T00:00:00Z", "1969-12-31"},
		{"day: midnight before 1970", Day, utc("1969-12-31T00:00:00Z"), "1969-12-31T00:00:00Z", "1970-01-01T00:00:00Z", "1969-12-31"},
		{"day: local time is converted to UTC", Day, time.Date(2026, 11, 30, 20, 0, 0, 0, est), "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", "2026-12-01"},
		{"month: Nov 30 23:59:59 resets Dec 1", Month, utc("2026-11-30T23:59:59Z"), "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", "2026-11"},
		{"month: first instant", Month, utc("2026-12-01T00:00:00Z"), "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026-12"},
		{"month: January 31 to February", Month, utc("2027-01-31T12:00:00Z"), "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z", "2027-01"},
		{"month: leap February", Month, utc("2028-02-29T23:59:59Z"), "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", "2028-02"},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if got := tt.p.Start(tt.at); !got.Equal(utc(tt.wantStart)) || got.Location() != time.UTC {
				t.Errorf("Start = %v, want %s UTC", got, tt.wantStart)
			}
			if got := tt.p.Next(tt.at); !got.Equal(utc(tt.wantNext)) || got.Location() != time.UTC {
				t.Errorf("Next = %v, want %s UTC", got, tt.wantNext)
			}
			if got := tt.p.ID(tt.at); got != tt.wantID {
				t.Errorf("ID = %q, want %q", got, tt.wantID)
			}
			name := objectName(tt.p, tt.p.Start(tt.at))
			p, start, ok := parseObjectName(name)
			if !ok || p != tt.p || !start.Equal(tt.p.Start(tt.at)) {
				t.Errorf("parseObjectName(%q) = %v, %v, %v", name, p, start, ok)
			}
		})
	}
}

func TestPeriodPrev(t *testing.T) {
	tests := []struct {
		rule  string
		p     Period
		start time.Time
		want  time.Time
	}{
		{"day before Dec 1 is Nov 30", Day, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{"month before January is December", Month, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{"month before March is February", Month, time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2028, 2, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if got := tt.p.prev(tt.start); !got.Equal(tt.want) {
				t.Errorf("prev = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParsePeriod(t *testing.T) {
	tests := []struct {
		rule    string
		in      string
		want    Period
		wantErr bool
	}{
		{"day", "day", Day, false},
		{"month", "month", Month, false},
		{"case and space insensitive", " Month ", Month, false},
		{"unknown is an error", "week", 0, true},
		{"empty is an error", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			got, err := ParsePeriod(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParsePeriod(%q) = %v, %v", tt.in, got, err)
			}
			if err != nil {
				return
			}
			if got.String() != tt.want.String() {
				t.Errorf("String = %q", got.String())
			}
			text, err := got.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			var back Period
			if err := back.UnmarshalText(text); err != nil || back != got {
				t.Errorf("text round trip = %v, %v", back, err)
			}
		})
	}
}

func TestInvalidPeriod(t *testing.T) {
	var p Period
	if p.Valid() || !p.Start(t0).IsZero() || !p.Next(t0).IsZero() || p.ID(t0) != "" {
		t.Error("zero Period should be invalid with zero bounds")
	}
	if _, err := p.MarshalText(); err == nil {
		t.Error("MarshalText of invalid Period should fail")
	}
	if p.String() != "Period(0)" {
		t.Errorf("String = %q", p.String())
	}
}

func TestParseObjectNameRejectsJunk(t *testing.T) {
	for _, name := range []string{
		".tmp_123456", "garbage", "day-", "day-notadate", "day-2026-11-31",
		"day-2026-1-3", "month-2026-13", "month-2026-11-30", "day-2026-11-30.bak",
		"week-2026-11", "Day-2026-11-30",
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, ok := parseObjectName(name); ok {
				t.Errorf("parseObjectName(%q) accepted junk", name)
			}
		})
	}
}
