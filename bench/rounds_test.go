package main

import (
	"slices"
	"testing"
	"time"
)

// Each workload keeps its median round, with every round's req/s in
// round order; the failures of the rounds left out are counted.
func TestMedianRounds(t *testing.T) {
	at := func(kind string, round int, perSecond int, fails int64) cell {
		return cell{level: 32, kind: kind, round: round, res: result{n: perSecond, fails: fails, wall: time.Second}}
	}
	cells := []cell{
		at(kindTuned, 0, 1800, 0), at(kindFirst, 0, 4000, 0),
		at(kindTuned, 1, 1500, 0), at(kindFirst, 1, 4600, 2),
		at(kindTuned, 2, 2000, 0), at(kindFirst, 2, 3500, 0),
	}
	got, fails := medianRounds(cells)
	if len(got) != 2 || got[0].kind != kindTuned || got[1].kind != kindFirst {
		t.Fatalf("cells %+v, want tuned then first", got)
	}
	if got[0].round != 0 || got[1].round != 0 {
		t.Errorf("median rounds %d and %d, want 0 and 0", got[0].round, got[1].round)
	}
	if !slices.Equal(got[1].rounds, []float64{4000, 4600, 3500}) {
		t.Errorf("first notices' rounds %v, want 4000 4600 3500", got[1].rounds)
	}
	if fails != 2 {
		t.Errorf("%d failures left out, want 2", fails)
	}
	// Two rounds: the lower.
	got, _ = medianRounds(cells[:4])
	if got[1].res.n != 4000 {
		t.Errorf("median of 4000 and 4600: %d, want the lower", got[1].res.n)
	}
}

// Odd rounds run the units backwards, each first-notice cell still before
// the duplicates that resend its notices.
func TestRoundOrder(t *testing.T) {
	kinds := []string{kindNaive, kindTuned, kindCeiling, kindFirst, kindFirstPurge, kindDuplicate,
		kindWeChatFirst, kindWeChatDuplicate, kindFirst + galeraTag, kindDuplicate + galeraTag}
	if got := roundOrder(kinds, 0); !slices.Equal(got, kinds) {
		t.Errorf("round 0: %q, want as given", got)
	}
	want := []string{kindFirst + galeraTag, kindDuplicate + galeraTag, kindWeChatFirst, kindWeChatDuplicate,
		kindFirst, kindFirstPurge, kindDuplicate, kindCeiling, kindTuned, kindNaive}
	if got := roundOrder(kinds, 1); !slices.Equal(got, want) {
		t.Errorf("round 1: %q\nwant %q", got, want)
	}
	if got := roundOrder(kinds, 2); !slices.Equal(got, kinds) {
		t.Errorf("round 2: %q, want as given", got)
	}
}
