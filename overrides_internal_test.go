package mcplimit

import "testing"

// An override takes precedence over its identity's tier: the zone-wide
// concurrency cap it sets replaces the tier's lower one, up to the
// server's and never above it; one it leaves at 0 is the tier's; off
// lifts the identity's cap and the tier's zone-wide one.
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
		{"off: no identity cap, the server's zone cap", Concurrency{Off: true}, Concurrency{Max: 3}, Concurrency{Max: 3}},
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

// A tier's `concurrency off` lifts the top level's caps for its
// identities: none of their own, and the server's zone-wide cap; at the
// top level it sets no cap at all.
func TestConcurrencyOffLiftsTheCapsBelowIt(t *testing.T) {
	free := Tier{Name: "free", Match: TierMatch{Placeholder: "{http.request.header.X-Plan}", Values: []string{"free"}},
		Limits: Limits{Concurrency: &Concurrency{Off: true}}}
	pol, err := compile(&Handler{Concurrency: &Concurrency{Max: 3, PerIdentity: 1}, Tiers: []Tier{free}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pol.tiers[0].limits.concurrency, (Concurrency{Max: 3}); got != want {
		t.Errorf("tier with concurrency off caps at %+v, want %+v", got, want)
	}
	if pol, err = compile(&Handler{Concurrency: &Concurrency{Off: true}}); err != nil {
		t.Fatal(err)
	}
	if got := pol.base.concurrency; got != (Concurrency{}) {
		t.Errorf("top-level concurrency off caps at %+v, want no cap", got)
	}
}
