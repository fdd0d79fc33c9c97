package mcplimit

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// perIdentityWarnings compiles h and returns the warnings its load gives
// about per-identity concurrency caps above the zone-wide one, each as
// its tier and override fields.
func perIdentityWarnings(t *testing.T, h *Handler) []map[string]any {
	t.Helper()
	pol, err := compile(h)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	warnPerIdentityAboveMax(pol, zap.New(core))
	var out []map[string]any
	for _, e := range logs.All() {
		out = append(out, e.ContextMap())
	}
	return out
}

// A per-identity cap above the zone-wide cap never binds: the load says
// so once, where the caps are set, naming both; caps within the
// zone-wide one, or with no zone-wide cap, give no warning.
func TestPerIdentityConcurrencyAboveTheZoneCapIsWarned(t *testing.T) {
	const fp = "00112233445566778899aabbccddeeff"
	for _, tc := range []struct {
		name string
		h    *Handler
		want []map[string]any // each warning's tier, override, max and per_identity
	}{
		{"top level", &Handler{Concurrency: &Concurrency{Max: 5, PerIdentity: 10}},
			[]map[string]any{{"max": int64(5), "per_identity": int64(10)}}},
		{"equal", &Handler{Concurrency: &Concurrency{Max: 5, PerIdentity: 5}}, nil},
		{"below", &Handler{Concurrency: &Concurrency{Max: 5, PerIdentity: 2}}, nil},
		{"no zone cap", &Handler{Concurrency: &Concurrency{PerIdentity: 10}}, nil},
		{"inherited by a tier, warned once", &Handler{
			Concurrency: &Concurrency{Max: 5, PerIdentity: 10},
			Tiers:       []Tier{{Name: "paid", Match: TierMatch{Placeholder: "{http.auth.user.plan}", Values: []string{"paid"}}, Limits: Limits{Tenant: &RateLimit{Rate: "9/s"}}}},
		}, []map[string]any{{"max": int64(5), "per_identity": int64(10)}}},
		{"a tier lowering the zone cap below the identity's", &Handler{
			Concurrency: &Concurrency{Max: 8, PerIdentity: 6},
			Tiers:       []Tier{{Name: "trial", Match: TierMatch{Placeholder: "{http.auth.user.plan}", Values: []string{"trial"}}, Limits: Limits{Concurrency: &Concurrency{Max: 4}}}},
		}, []map[string]any{{"tier": "trial", "max": int64(4), "per_identity": int64(6)}}},
		{"an override that changes no cap, not warned again", &Handler{
			Concurrency: &Concurrency{Max: 5, PerIdentity: 10},
			Overrides:   map[string]*Limits{fp: {Concurrency: &Concurrency{PerIdentity: 10}}},
		}, []map[string]any{{"max": int64(5), "per_identity": int64(10)}}},
		{"an override over two tiers that keep the zone cap, warned once", &Handler{
			Concurrency: &Concurrency{Max: 20, PerIdentity: 10},
			Tiers: []Tier{
				{Name: "a", Match: TierMatch{Placeholder: "{http.auth.user.plan}", Values: []string{"a"}}, Limits: Limits{Tenant: &RateLimit{Rate: "9/s"}}},
				{Name: "b", Match: TierMatch{Placeholder: "{http.auth.user.plan}", Values: []string{"b"}}, Limits: Limits{Tenant: &RateLimit{Rate: "8/s"}}},
			},
			Overrides: map[string]*Limits{fp: {Concurrency: &Concurrency{Max: 30, PerIdentity: 25}}},
		}, []map[string]any{{"override": fp, "tier": "", "max": int64(20), "per_identity": int64(25)}}},
		{"an override raising the identity's above the zone cap", &Handler{
			Concurrency: &Concurrency{Max: 8, PerIdentity: 2},
			Overrides:   map[string]*Limits{fp: {Concurrency: &Concurrency{PerIdentity: 20}}},
		}, []map[string]any{{"override": fp, "tier": "", "max": int64(8), "per_identity": int64(20)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := perIdentityWarnings(t, tc.h)
			if len(got) != len(tc.want) {
				t.Fatalf("%d warnings %v, want %d: %v", len(got), got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				for k, v := range w {
					if got[i][k] != v {
						t.Errorf("warning %d: %s = %v, want %v (all: %v)", i, k, got[i][k], v, got[i])
					}
				}
			}
		})
	}
}
