package mcplimit

import "testing"

// An override takes precedence over its identity's tier: the zone-wide
// concurrency cap it sets replaces the tier's lower one, up to the
// server's and never above it; one it leaves at 0 is the tier's.
func TestOverrideConcurrencyReplacesTheTiersUpToTheServers(t *testing.T) {
	const fp = "2dec10e3feec47eec5b1715aed15d0f7"
	trial := Tier{Name: "trial", Match: TierMatch{Placeholder: "{http.request.header.X-Plan}", Values: []string{"trial"}},
		Limits: Limits{Concurrency: &Concurrency{Max: 1, PerIdentity: 1}}}
	for _, c := range []struct {
		name           string
		override       Concurrency
		inTier, inNone Concurrency
	}{
		{"up to the server's", Concurrency{Max: 3, PerIdentity: 3}, Concurrency{Max: 3, PerIdentity: 3}, Concurrency{Max: 3, PerIdentity: 3}},
		{"never above the server's", Concurrency{Max: 10, PerIdentity: 10}, Concurrency{Max: 3, PerIdentity: 10}, Concurrency{Max: 3, PerIdentity: 10}},
		{"the tier's when left at 0", Concurrency{PerIdentity: 3}, Concurrency{Max: 1, PerIdentity: 3}, Concurrency{Max: 3, PerIdentity: 3}},
	} {
		pol, err := compile(&Handler{
			Concurrency: &Concurrency{Max: 3, PerIdentity: 10},
			Tiers:       []Tier{trial},
			Overrides:   map[string]*Limits{fp: {Concurrency: &c.override}},
		})
		if err != nil {
			t.Fatal(err)
		}
		key, _ := parseFingerprint(fp)
		o := pol.overrides[key]
		if got := o.apply(pol.tiers[0].limits).concurrency; got != c.inTier {
			t.Errorf("%s: an override of %+v in tier trial caps at %+v, want %+v", c.name, c.override, got, c.inTier)
		}
		if got := o.apply(pol.base).concurrency; got != c.inNone {
			t.Errorf("%s: an override of %+v in no tier caps at %+v, want %+v", c.name, c.override, got, c.inNone)
		}
	}
}
